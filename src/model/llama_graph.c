/* Stage graphs of the llama decoder (see llama.h). */
#include <math.h>
#include <string.h>

#include "baton/status.h"
#include "model/llama.h"
#include "wire/wire.h"

/* Nodes per layer: see build_layer (2 norms, 2 muls, 7 mat-muls, 4 reshapes,
 * 2 ropes, attention, 2 adds, silu or gelu, 1 mul, 2 row selections; qwen2:
 * 3 bias adds; qwen3: 2 head norms and their 2 muls; gemma3: those and 2 post
 * norms and their 2 muls: 32) with margin. */
#define NODES_PER_LAYER 36u
#define LEAVES_PER_LAYER 16u

uint32_t baton_llama_max_leaves(const struct baton_llama_stage *st)
{
    return (st->layer_end - st->layer_begin) * LEAVES_PER_LAYER + 16u;
}

uint32_t baton_llama_max_nodes(const struct baton_llama_stage *st)
{
    return (st->layer_end - st->layer_begin) * NODES_PER_LAYER + 16u;
}

/* A view of t with a new shape at the same offset (t's first bytes). */
static uint32_t leaf_view(struct baton_gb *gb, const struct baton_tensor_desc *t, uint64_t ne0,
                          uint64_t ne1, uint64_t ne2)
{
    struct baton_tensor_desc v = *t;
    int rc;

    v.ne[0] = ne0;
    v.ne[1] = ne1;
    v.ne[2] = ne2;
    v.ne[3] = 1;
    rc = baton_tensor_contiguous_nb(v.type, v.ne, v.nb);
    if (rc != 0 || v.nb[3] > t->nbytes) {
        if (!gb->error)
            gb->error = rc ? rc : BATON_E_BOUNDS;
        return BATON_SRC_NONE;
    }
    v.nbytes = v.nb[3];
    return baton_gb_leaf(gb, &v);
}

static uint32_t leaf(struct baton_gb *gb, const struct baton_tensor_desc *t)
{
    return baton_gb_leaf(gb, t);
}

static uint32_t node(struct baton_gb *gb, uint32_t op, uint32_t type, uint64_t ne0, uint64_t ne1,
                     uint64_t ne2, uint32_t s0, uint32_t s1, const uint32_t *params)
{
    const uint64_t ne[4] = {ne0, ne1, ne2, 1};
    const uint32_t src[BATON_MAX_SRC] = {s0, s1, BATON_SRC_NONE, BATON_SRC_NONE, BATON_SRC_NONE,
                                         BATON_SRC_NONE};

    return baton_gb_node(gb, op, type, ne, src, params);
}

/* Result shape helpers: every activation here is F32 {ne0, n_tokens}. */
static uint32_t rms_norm_mul(struct baton_gb *gb, const struct baton_llama_hparams *hp, uint32_t x,
                             const struct baton_tensor_desc *g, uint32_t n)
{
    uint32_t params[BATON_N_PARAMS] = {0};
    uint32_t nrm;

    params[0] = baton_gb_f32(hp->rms_eps);
    nrm = node(gb, BATON_OP_RMS_NORM, BATON_TYPE_F32, hp->n_embd, n, 1, x, BATON_SRC_NONE, params);
    return node(gb, BATON_OP_MUL, BATON_TYPE_F32, hp->n_embd, n, 1, nrm, leaf(gb, g), NULL);
}

static uint32_t mul_mat(struct baton_gb *gb, const struct baton_tensor_desc *w, uint32_t x,
                        uint32_t n)
{
    return node(gb, BATON_OP_MUL_MAT, BATON_TYPE_F32, w->ne[1], n, 1, leaf(gb, w), x, NULL);
}

/* qwen3's norm over each head: x {hd, nh, n} -> RMS norm over hd, times
 * g {hd} (broadcast over heads and tokens). */
static uint32_t head_norm(struct baton_gb *gb, const struct baton_llama_hparams *hp, uint32_t x,
                          const struct baton_tensor_desc *g, uint32_t nh, uint32_t n)
{
    uint32_t params[BATON_N_PARAMS] = {0};
    uint32_t nrm;

    params[0] = baton_gb_f32(hp->rms_eps);
    nrm = node(gb, BATON_OP_RMS_NORM, BATON_TYPE_F32, hp->head_dim, nh, n, x, BATON_SRC_NONE,
               params);
    return node(gb, BATON_OP_MUL, BATON_TYPE_F32, hp->head_dim, nh, n, nrm, leaf(gb, g), NULL);
}

/* ROPE of x {hd, nh, n}, or ROPE_FREQS with the rope_freqs leaf freqs
 * (Llama 3.1+) when it is not BATON_SRC_NONE. */
static uint32_t rope(struct baton_gb *gb, uint32_t x, uint32_t pos, uint32_t freqs, uint32_t hd,
                     uint32_t nh, uint32_t n, const uint32_t *params)
{
    const uint64_t ne[4] = {hd, nh, n, 1};
    const uint32_t src[BATON_MAX_SRC] = {x, pos, freqs, BATON_SRC_NONE, BATON_SRC_NONE,
                                         BATON_SRC_NONE};

    return baton_gb_node(gb, freqs == BATON_SRC_NONE ? BATON_OP_ROPE : BATON_OP_ROPE_FREQS,
                         BATON_TYPE_F32, ne, src, params);
}

/* W x (+ b when the architecture has projection biases). */
static uint32_t proj(struct baton_gb *gb, const struct baton_llama_hparams *hp,
                     const struct baton_tensor_desc *w, const struct baton_tensor_desc *b, uint32_t x,
                     uint32_t n)
{
    uint32_t y = mul_mat(gb, w, x, n);

    if (!hp->qkv_bias)
        return y;
    return node(gb, BATON_OP_ADD, BATON_TYPE_F32, w->ne[1], n, 1, y, leaf(gb, b), NULL);
}

/* One layer over n tokens. With sel != BATON_SRC_NONE (the model's last
 * layer, when only n_out < n rows reach the output head), the rows sel
 * names (n_out indices) are taken right after ATTENTION, which still runs
 * over all n tokens and writes all n into the KV cache: the attention
 * output projection and the feed-forward then run on n_out rows, as
 * llama.cpp's graphs do (its inp_out_ids). Every op after the selection
 * works row by row, and a row's MUL_MAT result is the same in a product of
 * any number of columns (src/compute/cpu/README.md), so the selected rows
 * hold the same bits as when every row went through. */
static uint32_t build_layer(struct baton_gb *gb, const struct baton_llama_hparams *hp,
                            const struct baton_llama_layer *L, uint32_t il, uint32_t x,
                            uint32_t pos, uint32_t att_pos, uint32_t freqs, uint32_t n,
                            uint32_t sel, uint32_t n_out)
{
    const uint32_t hd = hp->head_dim;
    const int swa = baton_llama_layer_swa(hp, il);
    uint32_t rope_p[BATON_N_PARAMS] = {0};
    uint32_t attn_p[BATON_N_PARAMS] = {0};
    uint32_t h, q, k, v, a, o, g, u, d;

    rope_p[0] = hp->n_rot;
    rope_p[1] = baton_gb_f32(swa ? hp->rope_base_swa : hp->rope_base);
    rope_p[2] = hp->rope_mode;
    /* linear rope scaling: not on gemma3's sliding layers (llama.cpp's
     * rope_freq_scale_train_swa, 1); p3 = 0 when there is none */
    if (!swa && hp->rope_scale != 1.0f)
        rope_p[3] = baton_gb_f32(hp->rope_scale);
    if (hp->attn_scale != 0.0f) {
        /* gemma3: the queries scaled (llama.cpp scales Q, then scores with
         * scale 1: here the score is scaled, the same up to rounding) */
        attn_p[0] = baton_gb_f32(hp->attn_scale);
        attn_p[1] = 0;
    } else {
        /* score / sqrt(head_dim), divided as llama2.c's run.c does (p1 = 1) */
        attn_p[0] = baton_gb_f32(sqrtf((float)hd));
        attn_p[1] = 1;
    }
    attn_p[2] = swa ? hp->n_swa : 0;

    h = rms_norm_mul(gb, hp, x, &L->attn_norm, n);
    q = proj(gb, hp, &L->wq, &L->bq, h, n);
    k = proj(gb, hp, &L->wk, &L->bk, h, n);
    v = proj(gb, hp, &L->wv, &L->bv, h, n);
    q = node(gb, BATON_OP_RESHAPE, BATON_TYPE_F32, hd, hp->n_head, n, q, BATON_SRC_NONE, NULL);
    k = node(gb, BATON_OP_RESHAPE, BATON_TYPE_F32, hd, hp->n_head_kv, n, k, BATON_SRC_NONE, NULL);
    v = node(gb, BATON_OP_RESHAPE, BATON_TYPE_F32, hd, hp->n_head_kv, n, v, BATON_SRC_NONE, NULL);
    if (hp->qk_norm) {
        q = head_norm(gb, hp, q, &L->q_norm, hp->n_head, n);
        k = head_norm(gb, hp, k, &L->k_norm, hp->n_head_kv, n);
    }
    q = rope(gb, q, pos, freqs, hd, hp->n_head, n, rope_p);
    k = rope(gb, k, pos, freqs, hd, hp->n_head_kv, n, rope_p);
    {
        const uint64_t ne[4] = {hd, hp->n_head, n, 1};
        const uint32_t src[BATON_MAX_SRC] = {q, k, v, leaf(gb, &L->k_cache), leaf(gb, &L->v_cache),
                                             att_pos};

        a = baton_gb_node(gb, BATON_OP_ATTENTION, BATON_TYPE_F32, ne, src, attn_p);
    }
    a = node(gb, BATON_OP_RESHAPE, BATON_TYPE_F32, hp->n_embd_q, n, 1, a, BATON_SRC_NONE, NULL);
    if (sel != BATON_SRC_NONE) {
        a = node(gb, BATON_OP_GET_ROWS, BATON_TYPE_F32, hp->n_embd_q, n_out, 1, a, sel, NULL);
        x = node(gb, BATON_OP_GET_ROWS, BATON_TYPE_F32, hp->n_embd, n_out, 1, x, sel, NULL);
        n = n_out;
    }
    o = mul_mat(gb, &L->wo, a, n);
    if (hp->post_norms)
        o = rms_norm_mul(gb, hp, o, &L->attn_post_norm, n);
    x = node(gb, BATON_OP_ADD, BATON_TYPE_F32, hp->n_embd, n, 1, x, o, NULL);

    h = rms_norm_mul(gb, hp, x, &L->ffn_norm, n);
    g = mul_mat(gb, &L->w_gate, h, n);
    u = mul_mat(gb, &L->w_up, h, n);
    g = node(gb, hp->ffn_gelu ? BATON_OP_GELU : BATON_OP_SILU, BATON_TYPE_F32, hp->n_ff, n, 1, g,
             BATON_SRC_NONE, NULL);
    g = node(gb, BATON_OP_MUL, BATON_TYPE_F32, hp->n_ff, n, 1, g, u, NULL);
    d = mul_mat(gb, &L->w_down, g, n);
    if (hp->post_norms)
        d = rms_norm_mul(gb, hp, d, &L->ffn_post_norm, n);
    return node(gb, BATON_OP_ADD, BATON_TYPE_F32, hp->n_embd, n, 1, x, d, NULL);
}

int baton_llama_build_stage(const struct baton_llama_hparams *hp,
                            const struct baton_llama_stage *st, uint32_t n_tokens, uint32_t slot,
                            int want_logits, struct baton_gb *gb,
                            struct baton_llama_graph_inputs *in)
{
    return baton_llama_build_stage_out(hp, st, n_tokens, 1, slot, want_logits, gb, in);
}

int baton_llama_build_stage_out(const struct baton_llama_hparams *hp,
                                const struct baton_llama_stage *st, uint32_t n_tokens,
                                uint32_t n_out, uint32_t slot, int want_logits,
                                struct baton_gb *gb, struct baton_llama_graph_inputs *in)
{
    const uint32_t n = n_tokens;
    struct baton_llama_graph_inputs none = {BATON_SRC_NONE, BATON_SRC_NONE, BATON_SRC_NONE,
                                            BATON_SRC_NONE};
    uint32_t x, pos, att_pos, l, freqs = BATON_SRC_NONE, sel = BATON_SRC_NONE;

    if (in == NULL)
        in = &none;
    *in = none;
    if (n == 0 || (uint64_t)n * (st->seqs ? 3 : 1) > st->io.pos.ne[0] ||
        slot >= st->io.n_slots || slot >= BATON_LLAMA_MAX_SLOTS ||
        (n_out != 1 && (n_out > n || !st->seqs || want_logits ||
                        (n_out < n && n_out > st->io.last_idx.ne[0]))))
        return BATON_E_INVAL;
    pos = leaf_view(gb, &st->io.pos, n, 1, 1);
    /* several sequences: ATTENTION reads rows 1 and 2 (cells) of the same
     * tensor, ROPE row 0 (positions) */
    att_pos = st->seqs ? leaf_view(gb, &st->io.pos, n, 3, 1) : pos;
    in->pos = st->seqs ? att_pos : pos;
    if (st->first) {
        uint32_t ids = leaf_view(gb, &st->io.tokens[slot], n, 1, 1);

        in->tokens = ids;
        x = node(gb, BATON_OP_GET_ROWS, BATON_TYPE_F32, hp->n_embd, n, 1, leaf(gb, &st->tok_embd),
                 ids, NULL);
        if (hp->embd_scale) {
            /* gemma3: the rows times sqrtf(n_embd), as llama.cpp */
            uint32_t s[BATON_N_PARAMS] = {0};

            s[0] = baton_gb_f32(sqrtf((float)hp->n_embd));
            x = node(gb, BATON_OP_SCALE, BATON_TYPE_F32, hp->n_embd, n, 1, x, BATON_SRC_NONE, s);
        }
    } else {
        x = leaf_view(gb, &st->io.hidden_in[slot], hp->n_embd, n, 1);
    }
    if (hp->rope_freqs && st->layer_end > st->layer_begin)
        freqs = leaf(gb, &st->rope_freqs);
    /* the rows the output head reads (the last token's, or the last n_out
     * of a step that mixes a prompt's chunk with decode tokens): their
     * indices are a per-step input, applied in the last layer when this
     * stage has it, else before the head */
    if (st->last && n_out < n) {
        sel = leaf_view(gb, &st->io.last_idx, n_out, 1, 1);
        in->last_idx = sel;
    }
    for (l = st->layer_begin; l < st->layer_end; l++)
        x = build_layer(gb, hp, &st->layers[l - st->layer_begin], l, x, pos, att_pos, freqs, n,
                        l + 1 == st->layer_end ? sel : BATON_SRC_NONE, n_out);

    if (!st->last) {
        /* The last layer's residual add writes straight into hidden_out;
         * with no layer on this stage, pass the input through. */
        uint32_t out = leaf_view(gb, &st->io.hidden_out, hp->n_embd, n, 1);

        if (!(x & BATON_GB_NODE))
            x = node(gb, BATON_OP_RESHAPE, BATON_TYPE_F32, hp->n_embd, n, 1, x, BATON_SRC_NONE,
                     NULL);
        if (gb->g.nodes[x & ~BATON_GB_NODE].op == BATON_OP_RESHAPE) {
            const uint32_t one[BATON_N_PARAMS] = {0x3f800000u}; /* 1.0f */

            x = node(gb, BATON_OP_SCALE, BATON_TYPE_F32, hp->n_embd, n, 1, x, BATON_SRC_NONE, one);
        }
        baton_gb_set_out(gb, x, out);
    } else {
        uint32_t logits, am;

        if (sel != BATON_SRC_NONE && st->layer_end == st->layer_begin) /* else in the layer */
            x = node(gb, BATON_OP_GET_ROWS, BATON_TYPE_F32, hp->n_embd, n_out, 1, x, sel, NULL);
        x = rms_norm_mul(gb, hp, x, &st->output_norm, n_out);
        logits = mul_mat(gb, &st->output, x, n_out);
        if (want_logits)
            baton_gb_set_out(gb, logits, leaf(gb, &st->io.logits));
        if (st->sample)
            am = node(gb, BATON_OP_SAMPLE, BATON_TYPE_I32, n_out, 1, 1, logits,
                      leaf_view(gb, &st->io.sample, 6, n_out, 1), NULL);
        else
            am = node(gb, BATON_OP_ARGMAX, BATON_TYPE_I32, n_out, 1, 1, logits, BATON_SRC_NONE,
                      NULL);
        in->argmax = st->seqs ? leaf_view(gb, &st->io.argmax, n_out, 1, 1)
                              : leaf(gb, &st->io.argmax);
        baton_gb_set_out(gb, am, in->argmax);
    }
    return baton_gb_finish(gb);
}
