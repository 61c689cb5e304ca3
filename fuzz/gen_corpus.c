/* Seed corpus generator: writes small valid (and a few deliberately broken)
 * inputs for every fuzz target, made with the real encoders of src/wire,
 * the graph builder of src/model and gguf_writer.c.
 *
 *   fuzz_gen_corpus OUTDIR           writes OUTDIR/<target>/<name>
 *   fuzz_gen_corpus --check DIR      exits 1 if any seed is missing from
 *                                    DIR/<target>/ or differs from it, or
 *                                    a file there is not named by its hash
 *
 * A seed's file name is the hex of its BLAKE2b-128 hash (libsodium
 * crypto_generichash, 16-byte output, no key), so `b2sum -l 128 FILE`
 * prints the name, and regenerating never duplicates a file.
 * The input formats are described at the top of each fuzz/fuzz_<target>.c.
 */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <sodium.h>

#include "auth/auth.h"
#include "baton/status.h"
#include "core/limits.h"
#include "gguf_writer.h"
#include "model/gguf.h"
#include "model/graph_builder.h"
#include "model/llama.h"
#include "wire/wire.h"

static const char *out_dir;
static int check_mode;
static int n_written, n_missing;

/* ---- output ---- */

static void ensure_dir(const char *path)
{
    if (mkdir(path, 0755) != 0 && errno != EEXIST) {
        fprintf(stderr, "gen_corpus: mkdir %s: %s\n", path, strerror(errno));
        exit(1);
    }
}

static void emit(const char *target, const void *data, size_t len)
{
    unsigned char h[16];
    char name[33], dir[4096], path[4200];
    crypto_generichash(h, sizeof h, data, len, NULL, 0);
    for (int i = 0; i < 16; i++)
        snprintf(name + 2 * i, 3, "%02x", h[i]);
    snprintf(dir, sizeof dir, "%s/%s", out_dir, target);
    snprintf(path, sizeof path, "%s/%s", dir, name);
    if (check_mode) {
        FILE *f = fopen(path, "rb");
        int same = 0;
        if (f) {
            unsigned char *buf = malloc(len + 1);
            if (!buf)
                exit(1);
            same = fread(buf, 1, len + 1, f) == len && (len == 0 || memcmp(buf, data, len) == 0);
            free(buf);
            fclose(f);
        }
        if (!same) {
            fprintf(stderr, "gen_corpus: seed %s/%s missing or different\n", target, name);
            n_missing++;
        }
        return;
    }
    ensure_dir(out_dir);
    ensure_dir(dir);
    FILE *f = fopen(path, "wb");
    if (!f || (len > 0 && fwrite(data, 1, len, f) != len) || fclose(f) != 0) {
        fprintf(stderr, "gen_corpus: write %s failed\n", path);
        exit(1);
    }
    n_written++;
}

/* A growable byte buffer. */
struct buf {
    uint8_t *p;
    size_t len, cap;
};

static void bput(struct buf *b, const void *p, size_t n)
{
    if (n > b->cap - b->len) {
        size_t nc = b->cap ? b->cap : 256;
        while (n > nc - b->len)
            nc *= 2;
        uint8_t *np = realloc(b->p, nc);
        if (!np)
            exit(1);
        b->p = np;
        b->cap = nc;
    }
    if (n)
        memcpy(b->p + b->len, p, n);
    b->len += n;
}

static void bu8(struct buf *b, uint8_t v)
{
    bput(b, &v, 1);
}

static void bu16(struct buf *b, uint16_t v)
{
    uint8_t p[2];
    baton_wire_put_u16(p, v);
    bput(b, p, 2);
}

static void bu32(struct buf *b, uint32_t v)
{
    uint8_t p[4];
    baton_wire_put_u32(p, v);
    bput(b, p, 4);
}

static void bu64(struct buf *b, uint64_t v)
{
    uint8_t p[8];
    baton_wire_put_u64(p, v);
    bput(b, p, 8);
}

static void bfree(struct buf *b)
{
    free(b->p);
    memset(b, 0, sizeof *b);
}

static void emit_buf(const char *target, const struct buf *b)
{
    emit(target, b->p, b->len);
}

/* ---- wire pieces ---- */

static void header(struct buf *b, uint8_t cmd, uint16_t status, uint32_t seq, uint64_t len)
{
    uint8_t p[BATON_FRAME_HEADER_BYTES];
    struct baton_frame_header h = {.cmd = cmd, .flags = 0, .status = status, .seq = seq, .len = len};
    baton_wire_encode_header(p, &h);
    bput(b, p, sizeof p);
}

static void hello(struct buf *b, uint16_t vmin, uint16_t vmax, uint8_t role, uint64_t features)
{
    uint8_t p[BATON_HELLO_BYTES];
    struct baton_hello h;
    memset(&h, 0, sizeof h);
    h.version_min = vmin;
    h.version_max = vmax;
    h.role = role;
    h.features = features;
    for (int i = 0; i < 32; i++)
        h.nonce[i] = (uint8_t)(i * 7 + 1);
    baton_wire_encode_hello(p, &h);
    bput(b, p, sizeof p);
}

static void tensor_desc(struct buf *b, const struct baton_tensor_desc *t)
{
    uint8_t p[BATON_TENSOR_DESC_BYTES];
    baton_wire_encode_tensor(p, t);
    bput(b, p, sizeof p);
}

static struct baton_tensor_desc tensor(uint64_t buffer, uint64_t offset, uint32_t type,
                                       uint64_t ne0, uint64_t ne1, uint64_t ne2, uint64_t ne3)
{
    struct baton_tensor_desc t;
    memset(&t, 0, sizeof t);
    t.buffer = buffer;
    t.offset = offset;
    t.type = type;
    t.ne[0] = ne0;
    t.ne[1] = ne1;
    t.ne[2] = ne2;
    t.ne[3] = ne3;
    if (baton_tensor_contiguous_nb(type, t.ne, t.nb) != 0 ||
        baton_wire_tensor_extent(type, t.ne, t.nb, &t.nbytes) != 0) {
        fprintf(stderr, "gen_corpus: bad seed tensor\n");
        exit(1);
    }
    return t;
}

static void graph_payload(struct buf *b, const struct baton_graph *g)
{
    uint8_t p[BATON_GRAPH_NODE_BYTES];
    bu32(b, g->n_leaves);
    bu32(b, g->n_nodes);
    for (uint32_t i = 0; i < g->n_leaves; i++)
        tensor_desc(b, &g->leaves[i]);
    for (uint32_t j = 0; j < g->n_nodes; j++) {
        baton_wire_encode_node(p, &g->nodes[j]);
        bput(b, p, sizeof p);
    }
}

#define H0 ((uint64_t)1 << 32)       /* first buffer of a fresh server */
#define H1 (((uint64_t)1 << 32) | 1) /* second */
#define NONE BATON_SRC_NONE


/* ---- graphs ---- */

struct graph_store {
    struct baton_tensor_desc leaves[96];
    struct baton_graph_node nodes[96];
    struct baton_gb gb;
};

static void gs_init(struct graph_store *s)
{
    baton_gb_init(&s->gb, s->leaves, 96, s->nodes, 96);
}

static uint32_t gs_node(struct graph_store *s, uint32_t op, uint32_t type, uint64_t ne0,
                        uint64_t ne1, uint64_t ne2, uint32_t s0, uint32_t s1, uint32_t p0)
{
    const uint64_t ne[4] = {ne0, ne1, ne2, 1};
    const uint32_t src[BATON_MAX_SRC] = {s0, s1, NONE, NONE, NONE, NONE};
    uint32_t params[BATON_N_PARAMS] = {p0};
    return baton_gb_node(&s->gb, op, type, ne, src, params);
}

static void gs_finish(struct graph_store *s)
{
    if (baton_gb_finish(&s->gb) != 0) {
        fprintf(stderr, "gen_corpus: graph builder failed\n");
        exit(1);
    }
}

/* W {4,4} and x {4,2} in buffer H0: MUL_MAT, ADD, ARGMAX into an I32 leaf. */
static void graph_matmul(struct graph_store *s)
{
    gs_init(s);
    struct baton_tensor_desc w = tensor(H0, 0, BATON_TYPE_F32, 4, 4, 1, 1);
    struct baton_tensor_desc x = tensor(H0, 64, BATON_TYPE_F32, 4, 2, 1, 1);
    struct baton_tensor_desc am = tensor(H0, 128, BATON_TYPE_I32, 2, 1, 1, 1);
    uint32_t lw = baton_gb_leaf(&s->gb, &w), lx = baton_gb_leaf(&s->gb, &x);
    uint32_t lo = baton_gb_leaf(&s->gb, &am);
    uint32_t mm = gs_node(s, BATON_OP_MUL_MAT, BATON_TYPE_F32, 4, 2, 1, lw, lx, 0);
    uint32_t add = gs_node(s, BATON_OP_ADD, BATON_TYPE_F32, 4, 2, 1, mm, mm, 0);
    uint32_t amx = gs_node(s, BATON_OP_ARGMAX, BATON_TYPE_I32, 2, 1, 1, add, NONE, 0);
    baton_gb_set_out(&s->gb, amx, lo);
    gs_finish(s);
}

/* SAMPLE of 2 rows of 40 logits: leaves 0 logits {40,2} F32, 1 params
 * {6,2} I32, 2 the tokens {2} I32. */
static void graph_sample(struct graph_store *s)
{
    gs_init(s);
    struct baton_tensor_desc x = tensor(H0, 0, BATON_TYPE_F32, 40, 2, 1, 1);
    struct baton_tensor_desc p = tensor(H0, 320, BATON_TYPE_I32, 6, 2, 1, 1);
    struct baton_tensor_desc y = tensor(H0, 384, BATON_TYPE_I32, 2, 1, 1, 1);
    uint32_t lx = baton_gb_leaf(&s->gb, &x), lp = baton_gb_leaf(&s->gb, &p);
    uint32_t ly = baton_gb_leaf(&s->gb, &y);
    uint32_t smp = gs_node(s, BATON_OP_SAMPLE, BATON_TYPE_I32, 2, 1, 1, lx, lp, 0);
    baton_gb_set_out(&s->gb, smp, ly);
    gs_finish(s);
}

/* The leaf data of graph_sample: row 0 40 distinct logits sampled with
 * temperature 0.7 and top_p 0.9 over all, row 1 logits of 4 values (ties)
 * with temperature 1 and top_k 5 (the selection, then the sort). */
static void sample_data(struct buf *b)
{
    for (int r = 0; r < 2; r++)
        for (int i = 0; i < 40; i++) {
            const float v = r == 0 ? (float)((i * 7) % 40) * 0.1f : (float)(i % 4);

            bput(b, &v, 4);
        }
    for (int r = 0; r < 2; r++) {
        const float t = r == 0 ? 0.7f : 1.0f, top_p = r == 0 ? 0.9f : 1.0f;
        const int32_t rest[4] = {r == 0 ? 0 : 5, 12345 + r, 0, 3 + r};

        bput(b, &t, 4);
        bput(b, &top_p, 4);
        bput(b, rest, sizeof rest);
    }
}

/* A K-quant (or Q5_0 / Q5_1 / BF16 / IQ4_NL / IQ4_XS) weight (type wt, 2 rows of 256): MUL_MAT of 3 columns
 * (the prefill tiles) and of 1 column (decode), and GET_ROWS of its row 1.
 * Leaves: 0 W, 1 x {256,3}, 2 x1 {256,1}, 3 ids {1}, 4 y {2,3}, 5 y1 {2,1},
 * 6 row {256,1}; 14 KiB of buffer H0 (the others from byte 512, after W;
 * from 1024 after BF16's 1 KiB). */
static void graph_matmul_k(struct graph_store *s, uint32_t wt)
{
    const uint64_t o = wt == BATON_TYPE_BF16 ? 1024 : 512;
    gs_init(s);
    struct baton_tensor_desc w = tensor(H0, 0, wt, 256, 2, 1, 1);
    struct baton_tensor_desc x = tensor(H0, o, BATON_TYPE_F32, 256, 3, 1, 1);
    struct baton_tensor_desc x1 = tensor(H0, o + 3072, BATON_TYPE_F32, 256, 1, 1, 1);
    struct baton_tensor_desc ids = tensor(H0, o + 4096, BATON_TYPE_I32, 1, 1, 1, 1);
    struct baton_tensor_desc y = tensor(H0, o + 4160, BATON_TYPE_F32, 2, 3, 1, 1);
    struct baton_tensor_desc y1 = tensor(H0, o + 4224, BATON_TYPE_F32, 2, 1, 1, 1);
    struct baton_tensor_desc row = tensor(H0, o + 4288, BATON_TYPE_F32, 256, 1, 1, 1);
    uint32_t lw = baton_gb_leaf(&s->gb, &w), lx = baton_gb_leaf(&s->gb, &x);
    uint32_t lx1 = baton_gb_leaf(&s->gb, &x1), li = baton_gb_leaf(&s->gb, &ids);
    uint32_t ly = baton_gb_leaf(&s->gb, &y), ly1 = baton_gb_leaf(&s->gb, &y1);
    uint32_t lr = baton_gb_leaf(&s->gb, &row);
    uint32_t mm = gs_node(s, BATON_OP_MUL_MAT, BATON_TYPE_F32, 2, 3, 1, lw, lx, 0);
    baton_gb_set_out(&s->gb, mm, ly);
    uint32_t mm1 = gs_node(s, BATON_OP_MUL_MAT, BATON_TYPE_F32, 2, 1, 1, lw, lx1, 0);
    baton_gb_set_out(&s->gb, mm1, ly1);
    uint32_t gr = gs_node(s, BATON_OP_GET_ROWS, BATON_TYPE_F32, 256, 1, 1, lw, li, 0);
    baton_gb_set_out(&s->gb, gr, lr);
    gs_finish(s);
}

/* Every simple op once: GET_ROWS, RMS_NORM, SCALE, SILU, MUL, RESHAPE, ROPE. */
static void graph_ops(struct graph_store *s)
{
    gs_init(s);
    struct baton_tensor_desc table = tensor(H0, 0, BATON_TYPE_F32, 8, 4, 1, 1);
    struct baton_tensor_desc ids = tensor(H0, 128, BATON_TYPE_I32, 2, 1, 1, 1);
    struct baton_tensor_desc pos = tensor(H0, 192, BATON_TYPE_I32, 2, 1, 1, 1);
    struct baton_tensor_desc out = tensor(H0, 256, BATON_TYPE_F32, 4, 2, 2, 1);
    uint32_t lt = baton_gb_leaf(&s->gb, &table), li = baton_gb_leaf(&s->gb, &ids);
    uint32_t lp = baton_gb_leaf(&s->gb, &pos), lo = baton_gb_leaf(&s->gb, &out);
    uint32_t rows = gs_node(s, BATON_OP_GET_ROWS, BATON_TYPE_F32, 8, 2, 1, lt, li, 0);
    uint32_t norm = gs_node(s, BATON_OP_RMS_NORM, BATON_TYPE_F32, 8, 2, 1, rows, NONE,
                            baton_gb_f32(1e-5f));
    uint32_t sc = gs_node(s, BATON_OP_SCALE, BATON_TYPE_F32, 8, 2, 1, norm, NONE,
                          baton_gb_f32(0.5f));
    uint32_t si = gs_node(s, BATON_OP_SILU, BATON_TYPE_F32, 8, 2, 1, sc, NONE, 0);
    uint32_t mu = gs_node(s, BATON_OP_MUL, BATON_TYPE_F32, 8, 2, 1, si, norm, 0);
    uint32_t rs = gs_node(s, BATON_OP_RESHAPE, BATON_TYPE_F32, 4, 2, 2, mu, NONE, 0);
    const uint64_t ne[4] = {4, 2, 2, 1};
    const uint32_t src[BATON_MAX_SRC] = {rs, lp, NONE, NONE, NONE, NONE};
    uint32_t params[BATON_N_PARAMS] = {4, baton_gb_f32(10000.0f), 0};
    uint32_t ro = baton_gb_node(&s->gb, BATON_OP_ROPE, BATON_TYPE_F32, ne, src, params);
    baton_gb_set_out(&s->gb, ro, lo);
    gs_finish(s);
}

/* The RoPE variants of qwen and Llama 3.1: ROPE in NeoX mode (p2 = 2), then
 * ROPE_FREQS with a factors leaf {n_dims/2} and linear scaling (p3). Leaves: 0 x, 1 positions, 2
 * factors, 3 out. */
static void graph_rope_ext(struct graph_store *s)
{
    gs_init(s);
    struct baton_tensor_desc x = tensor(H0, 0, BATON_TYPE_F32, 4, 2, 2, 1);
    struct baton_tensor_desc pos = tensor(H0, 128, BATON_TYPE_I32, 2, 1, 1, 1);
    struct baton_tensor_desc ff = tensor(H0, 192, BATON_TYPE_F32, 2, 1, 1, 1);
    struct baton_tensor_desc out = tensor(H0, 256, BATON_TYPE_F32, 4, 2, 2, 1);
    uint32_t lx = baton_gb_leaf(&s->gb, &x), lp = baton_gb_leaf(&s->gb, &pos);
    uint32_t lf = baton_gb_leaf(&s->gb, &ff), lo = baton_gb_leaf(&s->gb, &out);
    const uint64_t ne[4] = {4, 2, 2, 1};
    const uint32_t src1[BATON_MAX_SRC] = {lx, lp, NONE, NONE, NONE, NONE};
    uint32_t params[BATON_N_PARAMS] = {4, baton_gb_f32(10000.0f), 2};
    uint32_t r1 = baton_gb_node(&s->gb, BATON_OP_ROPE, BATON_TYPE_F32, ne, src1, params);
    const uint32_t src2[BATON_MAX_SRC] = {r1, lp, lf, NONE, NONE, NONE};
    params[2] = 0;
    params[3] = baton_gb_f32(0.125f); /* linear rope scaling */
    uint32_t r2 = baton_gb_node(&s->gb, BATON_OP_ROPE_FREQS, BATON_TYPE_F32, ne, src2, params);
    baton_gb_set_out(&s->gb, r2, lo);
    gs_finish(s);
}

/* A one-layer llama stage (first and last) for 2 tokens, every tensor in
 * buffer H0; returns the bytes the buffer needs and the I/O offsets. */
struct llama_seed {
    struct baton_llama_hparams hp;
    struct baton_llama_stage st;
    struct baton_llama_layer layer;
    uint64_t bytes;
};

static void place(struct llama_seed *ls, struct baton_tensor_desc *t, uint32_t type, uint64_t ne0,
                  uint64_t ne1, uint64_t ne2)
{
    *t = tensor(H0, ls->bytes, type, ne0, ne1, ne2, 1);
    ls->bytes += (t->nbytes + 63) & ~(uint64_t)63;
}

/* The llama stage graph of 2 tokens; flags bit 0 (seqs): several sequences
 * ({2,3} positions for ATTENTION) and the last stage sampling both tokens
 * (SAMPLE); bit 1: F16 KV caches (--kv-type f16); bit 2: gemma3 (Q/K head
 * norms, the embedding scaled, post norms, GELU, a sliding window of 1 cell
 * on its one layer, the queries scaled). */
static void graph_llama_ex(struct graph_store *s, struct llama_seed *ls, int flags)
{
    const int seqs = flags & 1;
    const uint32_t kv_type = (flags & 2) ? BATON_TYPE_F16 : BATON_TYPE_F32;

    memset(ls, 0, sizeof *ls);
    struct baton_llama_hparams *hp = &ls->hp;
    hp->n_vocab = 8;
    hp->n_embd = 8;
    hp->n_layer = 1;
    hp->n_head = 2;
    hp->n_head_kv = 1;
    hp->n_ff = 16;
    hp->head_dim = 4;
    hp->n_embd_q = 8;
    hp->n_rot = 4;
    hp->n_ctx_train = 16;
    hp->rms_eps = 1e-5f;
    hp->rope_base = 10000.0f;
    hp->rope_scale = 1.0f;
    if (flags & 4) {
        hp->arch = BATON_ARCH_GEMMA3;
        hp->rope_mode = BATON_ROPE_NEOX;
        hp->qk_norm = hp->embd_scale = hp->post_norms = hp->ffn_gelu = 1;
        hp->n_swa = 1;
        hp->swa_period = 0; /* every layer slides */
        hp->rope_base_swa = 10000.0f;
        hp->attn_scale = 0.5f;
    }
    struct baton_llama_stage *st = &ls->st;
    struct baton_llama_layer *L = &ls->layer;
    st->layer_begin = 0;
    st->layer_end = 1;
    st->first = st->last = 1;
    st->layers = L;
    const uint64_t e = 8, kv = 4, ff = 16, ctx = 8, u = 2;
    place(ls, &st->tok_embd, BATON_TYPE_F32, e, hp->n_vocab, 1);
    place(ls, &L->attn_norm, BATON_TYPE_F32, e, 1, 1);
    place(ls, &L->wq, BATON_TYPE_F32, e, e, 1);
    place(ls, &L->wk, BATON_TYPE_F32, e, kv, 1);
    place(ls, &L->wv, BATON_TYPE_F32, e, kv, 1);
    place(ls, &L->wo, BATON_TYPE_F32, e, e, 1);
    place(ls, &L->ffn_norm, BATON_TYPE_F32, e, 1, 1);
    place(ls, &L->w_gate, BATON_TYPE_F32, e, ff, 1);
    place(ls, &L->w_up, BATON_TYPE_F32, e, ff, 1);
    place(ls, &L->w_down, BATON_TYPE_F32, ff, e, 1);
    if (flags & 4) {
        place(ls, &L->q_norm, BATON_TYPE_F32, 4, 1, 1);
        place(ls, &L->k_norm, BATON_TYPE_F32, 4, 1, 1);
        place(ls, &L->attn_post_norm, BATON_TYPE_F32, e, 1, 1);
        place(ls, &L->ffn_post_norm, BATON_TYPE_F32, e, 1, 1);
    }
    place(ls, &L->k_cache, kv_type, 4, ctx, 1); /* {hd, n_ctx, nkv} */
    place(ls, &L->v_cache, kv_type, 4, ctx, 1);
    place(ls, &st->output_norm, BATON_TYPE_F32, e, 1, 1);
    place(ls, &st->output, BATON_TYPE_F32, e, hp->n_vocab, 1);
    place(ls, &st->io.tokens[0], BATON_TYPE_I32, u, 1, 1);
    place(ls, &st->io.pos, BATON_TYPE_I32, seqs ? 3 * u : u, 1, 1);
    place(ls, &st->io.hidden_in[0], BATON_TYPE_F32, e, u, 1);
    st->io.n_slots = 1;
    place(ls, &st->io.hidden_out, BATON_TYPE_F32, e, u, 1);
    place(ls, &st->io.last_idx, BATON_TYPE_I32, 1, 1, 1);
    place(ls, &st->io.logits, BATON_TYPE_F32, hp->n_vocab, 1, 1);
    place(ls, &st->io.argmax, BATON_TYPE_I32, seqs ? u : 1, 1, 1);
    if (seqs) {
        place(ls, &st->io.sample, BATON_TYPE_I32, 6 * u, 1, 1);
        st->seqs = st->sample = 1;
    }
    gs_init(s);
    if (baton_llama_max_leaves(st) > 96 || baton_llama_max_nodes(st) > 96 ||
        baton_llama_build_stage_out(hp, st, 2, seqs ? 2 : 1, 0, !seqs, &s->gb, NULL) != 0) {
        fprintf(stderr, "gen_corpus: llama stage graph failed\n");
        exit(1);
    }
}

static void graph_llama(struct graph_store *s, struct llama_seed *ls)
{
    graph_llama_ex(s, ls, 0);
}

/* ---- targets ---- */

static void gen_wire_header(void)
{
    struct buf b = {0};
    for (uint8_t cmd = 1; cmd < BATON_CMD_LIMIT; cmd++) {
        header(&b, cmd, 0, cmd, cmd == BATON_CMD_HELLO ? 48 : 8u * cmd);
        emit_buf("wire_header", &b);
        b.len = 0;
    }
    /* a reply with an error status; a request stream HELLO + DEVICE_INFO */
    header(&b, BATON_CMD_GET_TENSOR, (uint16_t)-BATON_E_BOUNDS, 9, 0);
    emit_buf("wire_header", &b);
    b.len = 0;
    header(&b, BATON_CMD_HELLO, 0, 1, 48);
    hello(&b, 1, 1, BATON_ROLE_CLIENT, 0);
    header(&b, BATON_CMD_DEVICE_INFO, 0, 2, 0);
    emit_buf("wire_header", &b);
    /* broken on purpose: magic, flags, reserved, length */
    b.p[1] = 'X';
    emit("wire_header", b.p, 24);
    b.p[1] = 'A';
    b.p[5] = 1;
    emit("wire_header", b.p, 24);
    b.p[5] = 0;
    b.p[12] = 1;
    emit("wire_header", b.p, 24);
    b.len = 0;
    header(&b, BATON_CMD_SET_TENSOR, 0, 3, BATON_MAX_MESSAGE_BYTES + 1);
    emit_buf("wire_header", &b);
    bfree(&b);
}

static void gen_wire_hello(void)
{
    struct buf b = {0};
    hello(&b, 1, 1, BATON_ROLE_CLIENT, 0);
    emit_buf("wire_hello", &b);
    b.len = 0;
    hello(&b, 1, 1, BATON_ROLE_SERVER, BATON_FEATURE_AUTH | BATON_FEATURE_PEER_COPY);
    emit_buf("wire_hello", &b);
    b.len = 0;
    hello(&b, 1, 7, BATON_ROLE_PEER, ~(uint64_t)0);
    emit_buf("wire_hello", &b);
    b.len = 0;
    /* as a whole first frame */
    header(&b, BATON_CMD_HELLO, 0, 1, 48);
    hello(&b, 1, 1, BATON_ROLE_CLIENT, 0);
    emit_buf("wire_hello", &b);
    b.len = 0;
    hello(&b, 2, 1, BATON_ROLE_CLIENT, 0); /* min > max */
    b.p[6] = 1;                             /* and a reserved byte */
    emit_buf("wire_hello", &b);
    bfree(&b);
}

static void gen_wire_tensor(void)
{
    struct buf b = {0};
    static const uint32_t types[] = {BATON_TYPE_F32,  BATON_TYPE_F16,  BATON_TYPE_Q4_0,
                                     BATON_TYPE_Q8_0, BATON_TYPE_I32,  BATON_TYPE_Q5_0,
                                     BATON_TYPE_Q5_1, BATON_TYPE_BF16, BATON_TYPE_IQ4_NL,
                                     BATON_TYPE_IQ4_XS};
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) {
        /* rows of 64, or one super-block of 256 */
        const uint64_t ne0 = types[i] == BATON_TYPE_IQ4_XS ? 256 : 64;
        struct baton_tensor_desc t = tensor(H0 + i, 64 * i, types[i], ne0, 3, 2, 1);
        tensor_desc(&b, &t);
        emit_buf("wire_tensor", &b);
        b.len = 0;
    }
    /* COPY_TENSOR's pair, a zero dimension, the dimension limit */
    struct baton_tensor_desc a = tensor(H0, 0, BATON_TYPE_F32, 16, 1, 1, 1);
    struct baton_tensor_desc c = tensor(H1, 64, BATON_TYPE_F32, 4, 4, 1, 1);
    tensor_desc(&b, &a);
    tensor_desc(&b, &c);
    emit_buf("wire_tensor", &b);
    b.len = 0;
    a = tensor(H0, 0, BATON_TYPE_F32, 16, 0, 3, 1);
    tensor_desc(&b, &a);
    emit_buf("wire_tensor", &b);
    b.len = 0;
    a = tensor(H0, UINT64_MAX - (BATON_MAX_DIM_ELEMS * 4), BATON_TYPE_F32, BATON_MAX_DIM_ELEMS, 1,
               1, 1);
    tensor_desc(&b, &a);
    emit_buf("wire_tensor", &b);
    bfree(&b);
}

static void gen_wire_graph(void)
{
    struct graph_store s;
    struct llama_seed ls;
    struct buf b = {0};
    static const uint8_t ones[4] = {1, 0, 0, 0};

    graph_matmul(&s);
    graph_payload(&b, &s.gb.g);
    emit_buf("wire_graph", &b);
    bput(&b, ones, sizeof ones); /* leaf data: every i32 is 1 */
    emit_buf("wire_graph", &b);
    b.len = 0;
    graph_sample(&s);
    graph_payload(&b, &s.gb.g);
    sample_data(&b);
    emit_buf("wire_graph", &b);
    b.len = 0;
    graph_ops(&s);
    graph_payload(&b, &s.gb.g);
    emit_buf("wire_graph", &b);
    bput(&b, ones, sizeof ones);
    emit_buf("wire_graph", &b);
    b.len = 0;
    graph_rope_ext(&s);
    graph_payload(&b, &s.gb.g);
    emit_buf("wire_graph", &b);
    bput(&b, ones, sizeof ones);
    emit_buf("wire_graph", &b);
    b.len = 0;
    graph_llama(&s, &ls);
    graph_payload(&b, &s.gb.g);
    emit_buf("wire_graph", &b);
    bput(&b, ones, sizeof ones);
    emit_buf("wire_graph", &b);
    b.len = 0;
    /* several sequences, sampled: ATTENTION's {2,3} positions, SAMPLE */
    graph_llama_ex(&s, &ls, 1);
    graph_payload(&b, &s.gb.g);
    emit_buf("wire_graph", &b);
    bput(&b, ones, sizeof ones);
    emit_buf("wire_graph", &b);
    b.len = 0;
    /* F16 KV caches */
    graph_llama_ex(&s, &ls, 2);
    graph_payload(&b, &s.gb.g);
    emit_buf("wire_graph", &b);
    b.len = 0;
    /* gemma3: GELU, the sliding window, post norms */
    graph_llama_ex(&s, &ls, 4);
    graph_payload(&b, &s.gb.g);
    emit_buf("wire_graph", &b);
    bfree(&b);
}

/* client_replies: byte 0 = calls - 1, the calls, then the server's bytes. */
static void server_hello(struct buf *b, uint64_t features)
{
    header(b, BATON_CMD_HELLO, 0, 1, 48);
    hello(b, 1, 1, BATON_ROLE_SERVER, features);
}

/* client_replies seeds for the pipelined step (registered graphs, GRAPH_RUN,
 * COPY_TENSOR_TO with options, the direct path, tracked replies) and keyed
 * connections: a session is byte 0 (mode | calls - 1), the call bytes (12..15
 * take an argument byte), the server's HELLO reply, then the replies in the
 * client's seq order (HELLO 1, keyed AUTH 2, then one per request); keyed
 * replies are records `u8 ctl, header, payload` whose tag the harness adds. */
#define CR_KEYED 0x10u
#define CR_PEER 0x20u
#define CR_BAD_PROOF 0x40u
#define CR_CLOSED 0x80u

struct cr {
    struct buf b;
    uint32_t seq;
    int keyed;
};

static void cr_begin(struct cr *s, uint8_t mode, const uint8_t *calls, size_t n, uint64_t features)
{
    if (n == 0 || n > 16) {
        fprintf(stderr, "gen_corpus: client_replies seed with %zu call bytes\n", n);
        exit(1);
    }
    s->b.len = 0;
    s->keyed = (mode & CR_KEYED) != 0;
    s->seq = s->keyed ? 3 : 2;
    bu8(&s->b, (uint8_t)(mode | (n - 1)));
    bput(&s->b, calls, n);
    server_hello(&s->b, features | (s->keyed ? BATON_FEATURE_AUTH : 0));
}

/* A reply frame with an explicit seq and length (keyed: record control ctl). */
static void cr_frame(struct cr *s, uint8_t ctl, uint8_t cmd, uint16_t status, uint32_t seq,
                     uint64_t len, const void *p, size_t n)
{
    if (s->keyed)
        bu8(&s->b, ctl);
    header(&s->b, cmd, status, seq, len);
    bput(&s->b, p, n);
}

/* The next reply: OK with payload p, or error status with no payload. */
static void cr_ok(struct cr *s, uint8_t cmd, const void *p, size_t n)
{
    cr_frame(s, 0, cmd, 0, s->seq++, n, p, n);
}

static void cr_err(struct cr *s, uint8_t cmd, int status)
{
    cr_frame(s, 0, cmd, (uint16_t)-status, s->seq++, 0, NULL, 0);
}

static void cr_emit(struct cr *s)
{
    emit_buf("client_replies", &s->b);
}

static void cr_id(uint8_t p[BATON_GRAPH_ID_BYTES], uint32_t id, uint32_t reserved)
{
    baton_wire_put_u32(p, id);
    baton_wire_put_u32(p + 4, reserved);
}

/* A COPY_TENSOR_TO result record; outcome and status as given. */
static void cr_copy(uint8_t p[BATON_COPY_RESULT_BYTES], uint32_t result, uint32_t status)
{
    struct baton_copy_result r = {result, status, 4096, 0, 3, 1};
    baton_wire_encode_copy_result(p, &r);
    if (result >= BATON_COPY_OUTCOME_LIMIT || status > 65535) {
        /* the encoder writes what it is given: the decoder's job to refuse */
        baton_wire_put_u32(p, result);
        baton_wire_put_u32(p + 4, status);
    }
}

/* A GRAPH_RUN reply: [result] [leaf bytes n of fill]. */
static void cr_run_reply(uint8_t *p, size_t *len, int handoff, uint32_t result, size_t n,
                         uint8_t fill)
{
    *len = 0;
    if (handoff) {
        cr_copy(p, result, 0);
        *len = BATON_COPY_RESULT_BYTES;
    }
    memset(p + *len, fill, n);
    *len += n;
}

static void gen_client_replies_pipeline(void)
{
    struct cr s = {{0}, 0, 0};
    uint8_t id[BATON_GRAPH_ID_BYTES], cp[BATON_COPY_RESULT_BYTES];
    uint8_t run[BATON_COPY_RESULT_BYTES + 256];
    uint8_t grant[BATON_GRANT_ID_BYTES], zeros[512] = {0}, alloc[16];
    size_t n;

    for (unsigned i = 0; i < BATON_GRANT_ID_BYTES; i++)
        grant[i] = (uint8_t)(0xA0 + i);
    baton_wire_put_u64(alloc, H0);
    baton_wire_put_u64(alloc + 8, 256);

    /* registered graphs succeed: ALLOC 256, GRAPH_REGISTER, its submit and a
     * wait, GRAPH_FREE of the first id, COPY_ROUTE (IPv4, IPv6) */
    {
        static const uint8_t calls[] = {0x21, 0x0c, 0x00, 0x0c, 0x01, 0x0a,
                                        0x0c, 0x02, 0x0c, 0x03, 0x0c, 0x07};
        cr_begin(&s, 0, calls, sizeof calls, BATON_FEATURE_PIPELINE);
        cr_ok(&s, BATON_CMD_ALLOC_BUFFER, alloc, sizeof alloc);
        cr_id(id, 1, 0);
        cr_ok(&s, BATON_CMD_GRAPH_REGISTER, id, sizeof id);
        cr_id(id, 2, 0);
        cr_ok(&s, BATON_CMD_GRAPH_REGISTER, id, sizeof id);
        cr_ok(&s, BATON_CMD_GRAPH_FREE, NULL, 0);
        cr_id(id, 1, 0);
        cr_ok(&s, BATON_CMD_COPY_ROUTE, id, sizeof id);
        cr_id(id, 2, 0);
        cr_ok(&s, BATON_CMD_COPY_ROUTE, id, sizeof id);
        cr_emit(&s);
    }
    /* GRAPH_REGISTER refused (E_LIMIT, not fatal), then an OK reply with
     * id 0 (E_PROTO: dead), then nothing more works */
    {
        static const uint8_t calls[] = {0x0c, 0x00, 0x0c, 0x00, 0x0c, 0x00};
        cr_begin(&s, 0, calls, sizeof calls, 0);
        cr_err(&s, BATON_CMD_GRAPH_REGISTER, BATON_E_LIMIT);
        cr_id(id, 0, 0);
        cr_ok(&s, BATON_CMD_GRAPH_REGISTER, id, sizeof id);
        cr_id(id, 1, 0);
        cr_ok(&s, BATON_CMD_GRAPH_REGISTER, id, sizeof id);
        cr_emit(&s);
    }
    /* COPY_ROUTE: an id record with non-zero reserved bytes */
    {
        static const uint8_t calls[] = {0x0c, 0x03, 0x00};
        cr_begin(&s, 0, calls, sizeof calls, 0);
        cr_id(id, 1, 1);
        cr_ok(&s, BATON_CMD_COPY_ROUTE, id, sizeof id);
        cr_emit(&s);
    }
    /* GRAPH_REGISTER: a 4-byte id record (wrong reply length) */
    {
        static const uint8_t calls[] = {0x0c, 0x00};
        cr_begin(&s, 0, calls, sizeof calls, 0);
        cr_id(id, 1, 0);
        cr_ok(&s, BATON_CMD_GRAPH_REGISTER, id, 4);
        cr_emit(&s);
    }
    /* GRAPH_FREE: E_NOT_FOUND, then OK, then an 8-byte payload (it has none) */
    {
        static const uint8_t calls[] = {0x0c, 0x42, 0x0c, 0x02, 0x0c, 0x02};
        cr_begin(&s, 0, calls, sizeof calls, 0);
        cr_err(&s, BATON_CMD_GRAPH_FREE, BATON_E_NOT_FOUND);
        cr_ok(&s, BATON_CMD_GRAPH_FREE, NULL, 0);
        cr_id(id, 1, 0);
        cr_ok(&s, BATON_CMD_GRAPH_FREE, id, sizeof id);
        cr_emit(&s);
    }
    /* error frames with a payload: 16 bytes (read and dropped), then 4097
     * (more than an error may carry: E_PROTO) */
    {
        static const uint8_t calls[] = {0x0c, 0x00, 0x0c, 0x03, 0x00};
        cr_begin(&s, 0, calls, sizeof calls, 0);
        cr_frame(&s, 0, BATON_CMD_GRAPH_REGISTER, (uint16_t)-BATON_E_GRAPH, s.seq++, 16, zeros,
                 16);
        cr_frame(&s, 0, BATON_CMD_COPY_ROUTE, (uint16_t)-BATON_E_INVAL, s.seq++, 4097, NULL, 0);
        cr_emit(&s);
    }

    /* GRAPH_RUN succeeds: register, route, then runs with HANDOFF + RETURN
     * (4 bytes), RETURN (256 bytes), HANDOFF with a fence and an input,
     * RESET alone, 4 fences and 4 inputs */
    {
        static const uint8_t calls[] = {0x0c, 0x00, 0x0c, 0x03, 0x0d, 0x06, 0x0d, 0x34,
                                        0x0d, 0x42, 0x0d, 0x08, 0x0d, 0x80};
        cr_begin(&s, 0, calls, sizeof calls, BATON_FEATURE_PIPELINE);
        cr_id(id, 1, 0);
        cr_ok(&s, BATON_CMD_GRAPH_REGISTER, id, sizeof id);
        cr_ok(&s, BATON_CMD_COPY_ROUTE, id, sizeof id);
        cr_run_reply(run, &n, 1, BATON_COPY_QUEUED, 4, 0x3c);
        cr_ok(&s, BATON_CMD_GRAPH_RUN, run, n);
        cr_run_reply(run, &n, 0, 0, 256, 0x41);
        cr_ok(&s, BATON_CMD_GRAPH_RUN, run, n);
        cr_run_reply(run, &n, 1, BATON_COPY_DONE, 0, 0);
        cr_ok(&s, BATON_CMD_GRAPH_RUN, run, n);
        cr_ok(&s, BATON_CMD_GRAPH_RUN, NULL, 0);
        cr_ok(&s, BATON_CMD_GRAPH_RUN, NULL, 0);
        cr_emit(&s);
    }
    /* GRAPH_RUN refused by the server (E_FENCE, then E_STALE_HANDLE), then
     * OK with RESET; then a run whose hand-off was cancelled (outcome 9) */
    {
        static const uint8_t calls[] = {0x0d, 0x46, 0x0d, 0x04, 0x0d, 0x08, 0x0d, 0x02};
        cr_begin(&s, 0, calls, sizeof calls, 0);
        cr_err(&s, BATON_CMD_GRAPH_RUN, BATON_E_FENCE);
        cr_err(&s, BATON_CMD_GRAPH_RUN, BATON_E_STALE_HANDLE);
        cr_ok(&s, BATON_CMD_GRAPH_RUN, NULL, 0);
        cr_run_reply(run, &n, 1, BATON_COPY_CANCELLED, 0, 0);
        cr_ok(&s, BATON_CMD_GRAPH_RUN, run, n);
        cr_emit(&s);
    }
    /* GRAPH_RUN with HANDOFF + RETURN: a bad copy result (outcome 10; status
     * above 65535; reserved bytes) is E_PROTO after the leaf bytes landed */
    for (int bad = 0; bad < 3; bad++) {
        static const uint8_t calls[] = {0x0d, 0x16, 0x00};
        cr_begin(&s, 0, calls, sizeof calls, 0);
        cr_run_reply(run, &n, 1, BATON_COPY_DONE, 16, 0x11);
        if (bad == 0)
            baton_wire_put_u32(run, BATON_COPY_OUTCOME_LIMIT);
        else if (bad == 1)
            baton_wire_put_u32(run + 4, 65536);
        else
            run[47] = 1;
        cr_ok(&s, BATON_CMD_GRAPH_RUN, run, n);
        cr_emit(&s);
    }
    /* GRAPH_RUN RETURN 256: the leaf bytes cut short by EOF (E_IO); a reply
     * one byte too long (E_PROTO, nothing written) */
    {
        static const uint8_t calls[] = {0x0d, 0x34};
        cr_begin(&s, 0, calls, sizeof calls, 0);
        cr_frame(&s, 0, BATON_CMD_GRAPH_RUN, 0, s.seq++, 256, zeros, 100);
        cr_emit(&s);
        cr_begin(&s, 0, calls, sizeof calls, 0);
        cr_frame(&s, 0, BATON_CMD_GRAPH_RUN, 0, s.seq++, 257, zeros, 257);
        cr_emit(&s);
    }
    /* GRAPH_RUN refused locally (HANDOFF without a result: E_INVAL; 5 fences:
     * E_LIMIT) after baton_conn_track: that slot gets the status and the
     * next submit's reply does not land in it (K2 in fuzz_client_replies.c) */
    {
        static const uint8_t calls[] = {0x0f, 0x04, 0x0d, 0xc2, 0x0d, 0xc0, 0x0e, 0x01, 0x0a};
        cr_begin(&s, 0, calls, sizeof calls, 0);
        cr_copy(cp, BATON_COPY_NOT_ALLOWED, (uint32_t)-BATON_E_AUTH);
        cr_ok(&s, BATON_CMD_COPY_TENSOR_TO, cp, sizeof cp);
        cr_emit(&s);
    }

    /* COPY_TENSOR_TO with options: DONE (sync), QUEUED (submitted ASYNC, then
     * wait), NOT_ALLOWED with its status, the counters query */
    {
        static const uint8_t calls[] = {0x0e, 0x00, 0x0e, 0x09, 0x0a, 0x0e, 0x10, 0x0e, 0x02};
        cr_begin(&s, 0, calls, sizeof calls, BATON_FEATURE_PEER_COPY | BATON_FEATURE_PIPELINE);
        cr_copy(cp, BATON_COPY_DONE, 0);
        cr_ok(&s, BATON_CMD_COPY_TENSOR_TO, cp, sizeof cp);
        cr_copy(cp, BATON_COPY_QUEUED, 0);
        cr_ok(&s, BATON_CMD_COPY_TENSOR_TO, cp, sizeof cp);
        cr_copy(cp, BATON_COPY_NOT_ALLOWED, (uint32_t)-BATON_E_AUTH);
        cr_ok(&s, BATON_CMD_COPY_TENSOR_TO, cp, sizeof cp);
        cr_copy(cp, BATON_COPY_NOT_ALLOWED, 0);
        cr_ok(&s, BATON_CMD_COPY_TENSOR_TO, cp, sizeof cp);
        cr_emit(&s);
    }
    /* COPY_TENSOR_TO: outcome 10, status 65536, reserved bytes, a 40-byte
     * reply, and a refusal (E_NOT_OWNED) */
    for (int bad = 0; bad < 5; bad++) {
        static const uint8_t calls[] = {0x0e, 0x00, 0x00};
        cr_begin(&s, 0, calls, sizeof calls, 0);
        cr_copy(cp, BATON_COPY_DONE, 0);
        if (bad == 0)
            baton_wire_put_u32(cp, BATON_COPY_OUTCOME_LIMIT);
        else if (bad == 1)
            baton_wire_put_u32(cp + 4, 65536);
        else if (bad == 2)
            cp[40] = 1;
        if (bad == 4)
            cr_err(&s, BATON_CMD_COPY_TENSOR_TO, BATON_E_NOT_OWNED);
        else
            cr_ok(&s, BATON_CMD_COPY_TENSOR_TO, cp, bad == 3 ? 40 : sizeof cp);
        cr_emit(&s);
    }

    /* the direct path: GRANT_WRITE, PEER_FENCE, two tracked PEER_WRITE
     * submits read one by one, a PEER_WRITE refused (E_FENCE), REVOKE */
    {
        static const uint8_t calls[] = {0x0e, 0x06, 0x0e, 0x03, 0x0f, 0x00, 0x0e, 0x04,
                                        0x0f, 0x04, 0x0e, 0x14, 0x0f, 0x07, 0x0e, 0x05};
        cr_begin(&s, 0, calls, sizeof calls, BATON_FEATURE_PEER_COPY);
        cr_ok(&s, BATON_CMD_GRANT_WRITE, grant, sizeof grant);
        cr_ok(&s, BATON_CMD_PEER_FENCE, NULL, 0);
        cr_ok(&s, BATON_CMD_PEER_WRITE, NULL, 0);
        cr_ok(&s, BATON_CMD_PEER_WRITE, NULL, 0);
        cr_err(&s, BATON_CMD_PEER_WRITE, BATON_E_FENCE);
        cr_emit(&s);
        static const uint8_t calls2[] = {0x0e, 0x06, 0x0e, 0x07, 0x0e, 0x07};
        cr_begin(&s, 0, calls2, sizeof calls2, BATON_FEATURE_PEER_COPY);
        cr_ok(&s, BATON_CMD_GRANT_WRITE, grant, sizeof grant);
        cr_ok(&s, BATON_CMD_REVOKE_GRANT, NULL, 0);
        cr_err(&s, BATON_CMD_REVOKE_GRANT, BATON_E_NOT_FOUND);
        cr_emit(&s);
    }
    /* GRANT_WRITE: the all-zero id; PEER_FENCE: an 8-byte reply */
    {
        static const uint8_t calls[] = {0x0e, 0x06};
        cr_begin(&s, 0, calls, sizeof calls, 0);
        cr_ok(&s, BATON_CMD_GRANT_WRITE, zeros, BATON_GRANT_ID_BYTES);
        cr_emit(&s);
        static const uint8_t calls2[] = {0x0e, 0x0b};
        cr_begin(&s, 0, calls2, sizeof calls2, 0);
        cr_ok(&s, BATON_CMD_PEER_FENCE, zeros, 8);
        cr_emit(&s);
    }
    /* a tracked PEER_WRITE refused (E_NOT_FOUND): its slot has it and wait
     * returns 0; then read_reply with nothing outstanding (E_PROTO, alive);
     * an untracked refusal read by read_reply is returned again by wait */
    {
        static const uint8_t calls[] = {0x0f, 0x00, 0x0e, 0x04, 0x0a, 0x0f, 0x01,
                                        0x0e, 0x01, 0x0f, 0x01, 0x0a, 0x0a};
        cr_begin(&s, 0, calls, sizeof calls, 0);
        cr_err(&s, BATON_CMD_PEER_WRITE, BATON_E_NOT_FOUND);
        cr_err(&s, BATON_CMD_COPY_TENSOR_TO, BATON_E_BOUNDS);
        cr_emit(&s);
    }

    /* tracking: three tracked submits (GRAPH_REGISTER, COPY_TENSOR_TO,
     * GRAPH_RUN with RETURN), the first read by read_reply, the rest by
     * wait; the refused COPY_TENSOR_TO's status is in its slot only */
    {
        static const uint8_t calls[] = {0x0f, 0x00, 0x0c, 0x01, 0x0f, 0x04, 0x0e, 0x01,
                                        0x0f, 0x08, 0x0d, 0x05, 0x0f, 0x01, 0x0a};
        cr_begin(&s, 0, calls, sizeof calls, BATON_FEATURE_PIPELINE);
        cr_id(id, 3, 0);
        cr_ok(&s, BATON_CMD_GRAPH_REGISTER, id, sizeof id);
        cr_err(&s, BATON_CMD_COPY_TENSOR_TO, BATON_E_LIMIT);
        cr_run_reply(run, &n, 0, 0, 4, 0x7f);
        cr_ok(&s, BATON_CMD_GRAPH_RUN, run, n);
        cr_emit(&s);
    }
    /* tracking, then the connection dies in the middle: a reply with the
     * wrong seq (E_PROTO) goes to its slot, the next slot stays pending */
    {
        static const uint8_t calls[] = {0x0f, 0x00, 0x0e, 0x01, 0x0f, 0x04, 0x0e, 0x04,
                                        0x0f, 0x08, 0x0c, 0x01, 0x0a, 0x0f, 0x01};
        cr_begin(&s, 0, calls, sizeof calls, 0);
        cr_copy(cp, BATON_COPY_QUEUED, 0);
        cr_ok(&s, BATON_CMD_COPY_TENSOR_TO, cp, sizeof cp);
        cr_frame(&s, 0, BATON_CMD_PEER_WRITE, 0, s.seq + 1, 0, NULL, 0);
        cr_emit(&s);
    }
    /* baton_conn_track(NULL) disarms; a reply with the wrong cmd carrying
     * a status gives that status (E_QUOTA) and kills */
    {
        static const uint8_t calls[] = {0x0f, 0x0c, 0x0f, 0x02, 0x0c, 0x01, 0x0f, 0x01};
        cr_begin(&s, 0, calls, sizeof calls, 0);
        cr_frame(&s, 0, BATON_CMD_GRAPH_RUN, (uint16_t)-BATON_E_QUOTA, s.seq, 0, NULL, 0);
        cr_emit(&s);
    }
    /* a framing error frame (cmd 0) whose status is no baton status: the
     * caller sees BATON_E_PROTO (K1 in fuzz_client_replies.c) */
    {
        static const uint8_t calls[] = {0x0e, 0x01, 0x0f, 0x01};
        cr_begin(&s, 0, calls, sizeof calls, 0);
        cr_frame(&s, 0, 0, 0xffff, 0, 0, NULL, 0);
        cr_emit(&s);
    }

    /* keyed (MAC): DEVICE_INFO, ALLOC, GET, GRAPH_REGISTER, GRAPH_RUN with
     * RETURN, a refusal with an 8-byte payload, all tagged */
    {
        static const uint8_t calls[] = {0x00, 0x21, 0x05, 0x0c, 0x00, 0x0d, 0x14, 0x0c, 0x00};
        cr_begin(&s, CR_KEYED, calls, sizeof calls, BATON_FEATURE_PIPELINE);
        struct baton_device_info d;
        uint8_t di[BATON_DEVICE_INFO_BYTES];
        memset(&d, 0, sizeof d);
        d.total_memory = 1u << 30;
        d.version = 1;
        snprintf(d.name, sizeof d.name, "batond cpu");
        baton_wire_encode_device_info(di, &d);
        cr_ok(&s, BATON_CMD_DEVICE_INFO, di, sizeof di);
        cr_ok(&s, BATON_CMD_ALLOC_BUFFER, alloc, sizeof alloc);
        memset(run, 0x42, 64);
        cr_ok(&s, BATON_CMD_GET_TENSOR, run, 64);
        cr_id(id, 1, 0);
        cr_ok(&s, BATON_CMD_GRAPH_REGISTER, id, sizeof id);
        cr_run_reply(run, &n, 0, 0, 16, 0x24);
        cr_ok(&s, BATON_CMD_GRAPH_RUN, run, n);
        cr_frame(&s, 0, BATON_CMD_GRAPH_REGISTER, (uint16_t)-BATON_E_LIMIT, s.seq++, 8, zeros, 8);
        cr_emit(&s);
    }
    /* keyed, encrypted: GET, COPY_TENSOR_TO, GRAPH_RUN HANDOFF + RETURN,
     * tracked GRAPH_REGISTER submit read by read_reply */
    {
        static const uint8_t calls[] = {0x05, 0x0e, 0x00, 0x0d, 0x16, 0x0f, 0x00,
                                        0x0c, 0x01, 0x0f, 0x01};
        cr_begin(&s, CR_KEYED, calls, sizeof calls,
                 BATON_FEATURE_ENCRYPT | BATON_FEATURE_PEER_COPY | BATON_FEATURE_PIPELINE);
        memset(run, 0x42, 64);
        cr_ok(&s, BATON_CMD_GET_TENSOR, run, 64);
        cr_copy(cp, BATON_COPY_DONE, 0);
        cr_ok(&s, BATON_CMD_COPY_TENSOR_TO, cp, sizeof cp);
        cr_run_reply(run, &n, 1, BATON_COPY_QUEUED, 16, 0x99);
        cr_ok(&s, BATON_CMD_GRAPH_RUN, run, n);
        cr_id(id, 2, 0);
        cr_ok(&s, BATON_CMD_GRAPH_REGISTER, id, sizeof id);
        cr_emit(&s);
    }
    /* keyed, a byte flipped: the GET reply's last tag byte, a GRAPH_RUN
     * leaf byte, the header's seq (encrypted), the length field */
    {
        static const uint8_t ctls[] = {0x80 | 64, 0x80 | 25, 0x80 | 8, 0x80 | 16};
        for (unsigned k = 0; k < sizeof ctls; k++) {
            static const uint8_t calls[] = {0x05, 0x0d, 0x04, 0x00};
            cr_begin(&s, CR_KEYED, calls, sizeof calls, k == 2 ? BATON_FEATURE_ENCRYPT : 0);
            memset(run, 0x42, 64);
            cr_frame(&s, k == 0 ? ctls[k] : 0, BATON_CMD_GET_TENSOR, 0, s.seq++, 64, run, 64);
            cr_frame(&s, k ? ctls[k] : 0, BATON_CMD_GRAPH_RUN, 0, s.seq++, 4, run, 4);
            cr_emit(&s);
        }
    }
    /* keyed: a bad server proof; a server without AUTH; a record cut short;
     * a reply with the wrong seq (E_PROTO: a status is believed only with a
     * tag) */
    {
        static const uint8_t calls[] = {0x00};
        cr_begin(&s, CR_KEYED | CR_BAD_PROOF, calls, sizeof calls, 0);
        cr_emit(&s);
        s.b.len = 0;
        bu8(&s.b, CR_KEYED);
        bu8(&s.b, 0x00);
        server_hello(&s.b, 0);
        cr_emit(&s);
        static const uint8_t calls2[] = {0x05, 0x05};
        cr_begin(&s, CR_KEYED, calls2, sizeof calls2, 0);
        cr_frame(&s, 0, BATON_CMD_GET_TENSOR, 0, s.seq++, 64, zeros, 64);
        cr_frame(&s, 0, BATON_CMD_GET_TENSOR, 0, s.seq++, 64, zeros, 30);
        cr_emit(&s);
        cr_begin(&s, CR_KEYED, calls2, sizeof calls2, 0);
        cr_frame(&s, 0, BATON_CMD_GET_TENSOR, (uint16_t)-BATON_E_BOUNDS, s.seq + 5, 0, NULL, 0);
        cr_emit(&s);
    }
    /* 65 GRAPH_REGISTER submits: the 65th finds 64 outstanding and reads
     * them first, keeping the refusal of the 10th (the first submit is
     * tracked) for the wait; then the same with a reply with the wrong seq
     * in the middle (dead: that submit returns the kept refusal) */
    for (int die = 0; die < 2; die++) {
        static const uint8_t calls[] = {0x0f, 0x00, 0x0c, 0x0d, 0x0a};
        cr_begin(&s, 0, calls, sizeof calls, BATON_FEATURE_PIPELINE);
        for (uint32_t i = 0; i < 65; i++) {
            if (i == 9) {
                cr_err(&s, BATON_CMD_GRAPH_REGISTER, BATON_E_LIMIT);
                continue;
            }
            if (die && i == 30) {
                cr_frame(&s, 0, BATON_CMD_GRAPH_REGISTER, 0, s.seq + 7, 8, id, sizeof id);
                break;
            }
            cr_id(id, 1 + i, 0);
            cr_ok(&s, BATON_CMD_GRAPH_REGISTER, id, sizeof id);
        }
        cr_emit(&s);
    }
    /* the server's end closed after the handshake (mode bit 7): the send
     * fails and the frame already there is taken as the refusal: an error
     * frame gives its status; an OK frame gives E_IO, in the tracking slot
     * too (K3 in fuzz_client_replies.c); no frame at all: E_IO;
     * keyed, a tagged refusal */
    {
        static const uint8_t calls[] = {0x0c, 0x00, 0x00};
        cr_begin(&s, CR_CLOSED, calls, sizeof calls, 0);
        cr_err(&s, BATON_CMD_GRAPH_REGISTER, BATON_E_LIMIT);
        cr_emit(&s);
        static const uint8_t calls2[] = {0x0f, 0x00, 0x0c, 0x01, 0x0f, 0x01};
        cr_begin(&s, CR_CLOSED, calls2, sizeof calls2, 0);
        cr_id(id, 1, 0);
        cr_ok(&s, BATON_CMD_GRAPH_REGISTER, id, sizeof id);
        cr_emit(&s);
        static const uint8_t calls3[] = {0x0e, 0x00};
        cr_begin(&s, CR_CLOSED, calls3, sizeof calls3, 0);
        cr_emit(&s);
        static const uint8_t calls4[] = {0x0d, 0x06};
        cr_begin(&s, CR_CLOSED | CR_KEYED, calls4, sizeof calls4, 0);
        cr_frame(&s, 0, BATON_CMD_GRAPH_RUN, (uint16_t)-BATON_E_NOT_FOUND, s.seq++, 4, zeros, 4);
        cr_emit(&s);
    }
    /* keyed, peer role: tracked PEER_WRITE submits, PEER_FENCE, wait */
    {
        static const uint8_t calls[] = {0x0f, 0x00, 0x0e, 0x04, 0x0f, 0x04,
                                        0x0e, 0x24, 0x0e, 0x03, 0x0a};
        cr_begin(&s, CR_KEYED | CR_PEER, calls, sizeof calls,
                 BATON_FEATURE_PEER_COPY | BATON_FEATURE_PIPELINE);
        cr_ok(&s, BATON_CMD_PEER_WRITE, NULL, 0);
        cr_err(&s, BATON_CMD_PEER_WRITE, BATON_E_FENCE);
        cr_ok(&s, BATON_CMD_PEER_FENCE, NULL, 0);
        cr_emit(&s);
    }
    bfree(&s.b);
}

static void gen_client_replies(void)
{
    struct buf b = {0};
    uint8_t zeros[256] = {0};

    /* DEVICE_INFO, ALLOC 256, GET 16 floats, FREE */
    static const uint8_t calls1[] = {0x00, 0x21, 0x05, 0x02};
    bu8(&b, sizeof calls1 - 1);
    bput(&b, calls1, sizeof calls1);
    server_hello(&b, 0);
    struct baton_device_info d;
    memset(&d, 0, sizeof d);
    d.total_memory = 1u << 30;
    d.free_memory = 1u << 29;
    d.alignment = 64;
    d.max_buffer_bytes = 1u << 30;
    d.type_mask = 1u | (1u << 26);
    d.op_mask = 0xFFE;
    d.n_threads = 2;
    d.version = 1;
    snprintf(d.name, sizeof d.name, "batond cpu");
    uint8_t di[BATON_DEVICE_INFO_BYTES];
    baton_wire_encode_device_info(di, &d);
    header(&b, BATON_CMD_DEVICE_INFO, 0, 2, sizeof di);
    bput(&b, di, sizeof di);
    header(&b, BATON_CMD_ALLOC_BUFFER, 0, 3, 16);
    bu64(&b, H0);
    bu64(&b, 256);
    header(&b, BATON_CMD_GET_TENSOR, 0, 4, 64);
    bput(&b, zeros, 64);
    header(&b, BATON_CMD_FREE_BUFFER, 0, 5, 0);
    emit_buf("client_replies", &b);
    b.len = 0;

    /* ALLOC 1024, then a pipeline of 2 GETs and a SET */
    static const uint8_t calls2[] = {0x41, 0x19};
    bu8(&b, sizeof calls2 - 1);
    bput(&b, calls2, sizeof calls2);
    server_hello(&b, 0);
    header(&b, BATON_CMD_ALLOC_BUFFER, 0, 2, 16);
    bu64(&b, H0);
    bu64(&b, 1024);
    header(&b, BATON_CMD_GET_TENSOR, 0, 3, 128);
    bput(&b, zeros, 128);
    header(&b, BATON_CMD_GET_TENSOR, 0, 4, 256);
    bput(&b, zeros, 256);
    header(&b, BATON_CMD_SET_TENSOR, 0, 5, 0);
    emit_buf("client_replies", &b);
    b.len = 0;

    /* GRAPH_COMPUTE, then GRAPH_COMPUTE pipelined with a GET */
    static const uint8_t calls3[] = {0x07, 0x08};
    bu8(&b, sizeof calls3 - 1);
    bput(&b, calls3, sizeof calls3);
    server_hello(&b, 0);
    header(&b, BATON_CMD_GRAPH_COMPUTE, 0, 2, 0);
    header(&b, BATON_CMD_GRAPH_COMPUTE, 0, 3, 0);
    header(&b, BATON_CMD_GET_TENSOR, 0, 4, 64);
    bput(&b, zeros, 64);
    emit_buf("client_replies", &b);
    b.len = 0;

    /* semantic error replies, then a framing error frame (cmd 0) */
    static const uint8_t calls4[] = {0x02, 0x03, 0x04, 0x06, 0x00, 0x00};
    bu8(&b, sizeof calls4 - 1);
    bput(&b, calls4, sizeof calls4);
    server_hello(&b, 0);
    header(&b, BATON_CMD_FREE_BUFFER, (uint16_t)-BATON_E_STALE_HANDLE, 2, 0);
    header(&b, BATON_CMD_BUFFER_CLEAR, (uint16_t)-BATON_E_NOT_OWNED, 3, 0);
    header(&b, BATON_CMD_SET_TENSOR, (uint16_t)-BATON_E_BOUNDS, 4, 0);
    header(&b, BATON_CMD_COPY_TENSOR, (uint16_t)-BATON_E_SHAPE, 5, 0);
    header(&b, 0, (uint16_t)-BATON_E_MAGIC, 0, 0);
    emit_buf("client_replies", &b);
    b.len = 0;

    /* a server that requires AUTH; a wrong seq; stats and wait */
    bu8(&b, 0);
    bu8(&b, 0x00);
    server_hello(&b, BATON_FEATURE_AUTH);
    emit_buf("client_replies", &b);
    b.len = 0;
    static const uint8_t calls5[] = {0x00, 0x0a, 0x4b, 0x00};
    bu8(&b, sizeof calls5 - 1);
    bput(&b, calls5, sizeof calls5);
    server_hello(&b, 0);
    header(&b, BATON_CMD_DEVICE_INFO, 0, 7, sizeof di);
    bput(&b, di, sizeof di);
    emit_buf("client_replies", &b);
    b.len = 0;

    /* the device-info decoder alone */
    bput(&b, di, sizeof di);
    emit_buf("client_replies", &b);
    bfree(&b);
    gen_client_replies_pipeline();
}

static void gguf_vocab(struct gw *w)
{
    static const char *const extra[] = {"\xe2\x96\x81", "\xe2\x96\x81t", "he", "\xe2\x96\x81the",
                                        "on", "ce", "\xe2\x96\x81on", "nce", "\xe2\x96\x81once"};
    gw_vocab_gguf(w, extra, sizeof extra / sizeof extra[0]);
}

static void gguf_tiny_llama(struct gw *w, uint32_t align)
{
    const uint64_t e = 32, nv = 8, ff = 32;
    struct {
        const char *name;
        uint32_t n_dims, type;
        uint64_t ne[2];
    } t[] = {
        {"token_embd.weight", 2, BATON_TYPE_F32, {e, nv}},
        {"blk.0.attn_norm.weight", 1, BATON_TYPE_F32, {e, 1}},
        {"blk.0.attn_q.weight", 2, BATON_TYPE_Q8_0, {e, e}},
        {"blk.0.attn_k.weight", 2, BATON_TYPE_Q4_0, {e, e}},
        {"blk.0.attn_v.weight", 2, BATON_TYPE_F16, {e, e}},
        {"blk.0.attn_output.weight", 2, BATON_TYPE_F32, {e, e}},
        {"blk.0.ffn_norm.weight", 1, BATON_TYPE_F32, {e, 1}},
        {"blk.0.ffn_gate.weight", 2, BATON_TYPE_F32, {e, ff}},
        {"blk.0.ffn_up.weight", 2, BATON_TYPE_F32, {e, ff}},
        {"blk.0.ffn_down.weight", 2, BATON_TYPE_F32, {ff, e}},
        {"output_norm.weight", 1, BATON_TYPE_F32, {e, 1}},
    };
    const size_t n = sizeof t / sizeof t[0];
    uint64_t offs[sizeof t / sizeof t[0]], off = 0;
    gw_header(w, 3);
    gw_kv_str(w, "general.architecture", "llama");
    gw_kv_str(w, "general.name", "fuzz-tiny");
    if (align != BATON_GGUF_DEFAULT_ALIGNMENT)
        gw_kv_u32(w, "general.alignment", align);
    gw_kv_u32(w, "llama.context_length", 64);
    gw_kv_u32(w, "llama.embedding_length", (uint32_t)e);
    gw_kv_u32(w, "llama.block_count", 1);
    gw_kv_u32(w, "llama.feed_forward_length", (uint32_t)ff);
    gw_kv_u32(w, "llama.attention.head_count", 4);
    gw_kv_u32(w, "llama.attention.head_count_kv", 2);
    gw_kv_u32(w, "llama.rope.dimension_count", 8);
    gw_kv_f32(w, "llama.attention.layer_norm_rms_epsilon", 1e-5f);
    gw_kv_f32(w, "llama.rope.freq_base", 10000.0f);
    gw_kv_str(w, "tokenizer.ggml.model", "llama");
    gw_kv_array(w, "tokenizer.ggml.tokens", BATON_GGUF_STRING, nv);
    static const char *const pieces[] = {"<unk>", "<s>", "</s>", "\xe2\x96\x81", "a", "b", "ab",
                                         "\xe2\x96\201ab"};
    for (size_t i = 0; i < nv; i++)
        gw_str(w, pieces[i]);
    for (size_t i = 0; i < n; i++) {
        uint32_t be = 1, bb = 4;
        (void)baton_type_block(t[i].type, &be, &bb);
        offs[i] = off;
        off += (t[i].ne[0] / be * bb * t[i].ne[1] + align - 1) / align * align;
        gw_tensor_info(w, t[i].name, t[i].n_dims, t[i].ne, t[i].type, offs[i]);
    }
    size_t data = gw_data_begin(w, align);
    for (size_t i = 0; i < n; i++) {
        uint8_t one = (uint8_t)(i + 1);
        gw_pad_to(w, data, offs[i]);
        gw_bytes(w, &one, 1); /* first byte of each tensor non-zero */
    }
    gw_pad_to(w, data, off);
    gw_finish(w);
}

static void gen_gguf(void)
{
    struct gw w;

    gw_init(&w);
    gguf_vocab(&w);
    emit("gguf", w.p, w.len);
    gw_free(&w);

    gw_init(&w);
    gguf_tiny_llama(&w, 32);
    emit("gguf", w.p, w.len);
    gw_free(&w);
    gw_init(&w);
    gguf_tiny_llama(&w, 64);
    emit("gguf", w.p, w.len);
    gw_free(&w);

    /* every value type, as a scalar and as an array of two */
    gw_init(&w);
    gw_header(&w, 3);
    static const char *const names[] = {"u8", "i8", "u16", "i16", "u32", "i32", "f32",
                                        "bool", "string", "array", "u64", "i64", "f64"};
    static const unsigned sizes[] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};
    char key[64];
    for (uint32_t ty = 0; ty < BATON_GGUF_TYPE_COUNT; ty++) {
        if (ty == BATON_GGUF_ARRAY)
            continue;
        snprintf(key, sizeof key, "fuzz.scalar.%s", names[ty]);
        gw_kv(&w, key, ty);
        if (ty == BATON_GGUF_STRING)
            gw_str(&w, "value");
        else
            for (unsigned i = 0; i < sizes[ty]; i++)
                gw_u8(&w, ty == BATON_GGUF_BOOL ? 1 : (uint8_t)(0x80 + i));
        snprintf(key, sizeof key, "fuzz.array.%s", names[ty]);
        gw_kv_array(&w, key, ty, 2);
        for (int k = 0; k < 2; k++) {
            if (ty == BATON_GGUF_STRING)
                gw_str(&w, k ? "two" : "one");
            else
                for (unsigned i = 0; i < sizes[ty]; i++)
                    gw_u8(&w, ty == BATON_GGUF_BOOL ? (uint8_t)k : (uint8_t)(k + i));
        }
    }
    gw_kv_array(&w, "fuzz.array.empty", BATON_GGUF_U32, 0);
    gw_finish(&w);
    emit("gguf", w.p, w.len);
    gw_free(&w);

    /* version 2, one 4-d tensor and one 0-d tensor */
    gw_init(&w);
    gw_header(&w, 2);
    gw_kv_str(&w, "general.architecture", "none");
    const uint64_t ne4[4] = {2, 3, 1, 2};
    gw_tensor_info(&w, "four.d", 4, ne4, BATON_TYPE_F32, 0);
    gw_tensor_info(&w, "zero.d", 0, ne4, BATON_TYPE_I32, 64);
    size_t data = gw_data_begin(&w, 32);
    gw_pad_to(&w, data, 68);
    gw_finish(&w);
    emit("gguf", w.p, w.len);
    gw_free(&w);

    /* K-quant tensors (super-blocks of 256: Q2_K..Q6_K, 84..210 bytes) and
     * IQ4_XS (256, 136 bytes) / IQ4_NL (32, 18 bytes), rows of 256, then
     * the same file with the last super-block cut short and with a row of 320 (not a multiple of 256):
     * both rejected, naming the tensor */
    for (int variant = 0; variant < 3; variant++) {
        static const struct {
            const char *name;
            uint32_t type;
        } kq[] = {{"blk.0.attn_v.weight", BATON_TYPE_Q2_K},
                  {"blk.0.attn_output.weight", BATON_TYPE_Q3_K},
                  {"blk.0.ffn_gate.weight", BATON_TYPE_Q4_K},
                  {"blk.0.ffn_up.weight", BATON_TYPE_Q5_K},
                  {"output.weight", BATON_TYPE_Q6_K},
                  {"blk.0.attn_q.weight", BATON_TYPE_IQ4_XS},
                  {"blk.0.ffn_down.weight", BATON_TYPE_IQ4_NL}};
        const size_t nk = sizeof kq / sizeof kq[0];
        uint64_t koff[sizeof kq / sizeof kq[0]], kend = 0;
        gw_init(&w);
        gw_header(&w, 3);
        gw_kv_str(&w, "general.architecture", "llama");
        gw_kv_u32(&w, "general.file_type", 15);
        for (size_t i = 0; i < nk; i++) {
            uint32_t be = 1, bb = 1;
            (void)baton_type_block(kq[i].type, &be, &bb);
            const uint64_t kne[2] = {variant == 2 && i == 2 ? 320 : 256, 2};
            koff[i] = kend;
            kend += (2 * bb + 31) / 32 * 32;
            gw_tensor_info(&w, kq[i].name, 2, kne, kq[i].type, koff[i]);
        }
        size_t kdata = gw_data_begin(&w, 32);
        for (size_t i = 0; i < nk; i++) {
            const uint8_t d[4] = {0x00, 0x3c, 0x00, 0x38}; /* binary16 1.0, 0.5 */
            gw_pad_to(&w, kdata, koff[i]);
            gw_bytes(&w, d, sizeof d);
        }
        gw_pad_to(&w, kdata, variant == 1 ? kend - 32 - 1 : kend);
        gw_finish(&w);
        emit("gguf", w.p, w.len);
        gw_free(&w);
    }

    /* Q5_0 / Q5_1 tensors (blocks of 32: 22 / 24 bytes), rows of 96, then
     * the same file with the last block cut short and with a row of 40 (not
     * a multiple of 32): both rejected, naming the tensor */
    for (int variant = 0; variant < 3; variant++) {
        static const struct {
            const char *name;
            uint32_t type;
        } q5[] = {{"blk.0.ffn_down.weight", BATON_TYPE_Q5_0},
                  {"token_embd.weight", BATON_TYPE_Q5_1}};
        uint64_t qoff[2], qend = 0;
        gw_init(&w);
        gw_header(&w, 3);
        gw_kv_str(&w, "general.architecture", "qwen2");
        gw_kv_u32(&w, "general.file_type", 15);
        for (size_t i = 0; i < 2; i++) {
            uint32_t be = 1, bb = 1;
            (void)baton_type_block(q5[i].type, &be, &bb);
            const uint64_t qne[2] = {variant == 2 && i == 1 ? 40 : 96, 2};
            qoff[i] = qend;
            qend += (6 * bb + 31) / 32 * 32;
            gw_tensor_info(&w, q5[i].name, 2, qne, q5[i].type, qoff[i]);
        }
        size_t qdata = gw_data_begin(&w, 32);
        for (size_t i = 0; i < 2; i++) {
            /* d = 1.0, then (Q5_0) qh or (Q5_1) m = 0.5 */
            const uint8_t d[6] = {0x00, 0x3c, 0x00, 0x38, 0x0f, 0xf0};
            gw_pad_to(&w, qdata, qoff[i]);
            gw_bytes(&w, d, sizeof d);
        }
        gw_pad_to(&w, qdata, variant == 1 ? qoff[1] + 6 * 24 - 1 : qend);
        gw_finish(&w);
        emit("gguf", w.p, w.len);
        gw_free(&w);
    }

    /* a BF16 tensor (2 bytes per element, any row length), rows of 7,
     * then the same file with its data cut short by a byte */
    for (int variant = 0; variant < 2; variant++) {
        static const uint8_t d[4] = {0x80, 0x3f, 0xc0, 0xbf}; /* 1.0, -1.5 */
        const uint64_t bne[2] = {7, 2};
        gw_init(&w);
        gw_header(&w, 3);
        gw_kv_str(&w, "general.architecture", "llama");
        gw_tensor_info(&w, "token_embd.weight", 2, bne, BATON_TYPE_BF16, 0);
        size_t bdata = gw_data_begin(&w, 32);
        gw_bytes(&w, d, sizeof d);
        gw_pad_to(&w, bdata, variant == 1 ? 27 : 28);
        gw_finish(&w);
        emit("gguf", w.p, w.len);
        gw_free(&w);
    }

    /* a vocabulary with a chat template (--chat: recognized, markers looked
     * up), one per recognized layout and one that is none */
    {
        static const char *const tmpl[] = {
            "{{ '<|im_start|>' + message['role'] }}",
            "{{ '<|start_header_id|>' + message['role'] + '<|end_header_id|>' }}",
            "{{ '[INST] ' + content.strip() + ' [/INST]' }}",
            "{{ '<|user|>' + message['content'] + '<|end|>' }}",
            "{{- '[SYSTEM_PROMPT]' + s + '[/SYSTEM_PROMPT]' }}{{- '[INST]' + c + '[/INST]' }}",
            "{{- '[SYSTEM_PROMPT] ' + s + '[/SYSTEM_PROMPT]' }}{{- '[INST] ' + c + '[/INST]' }}",
            "{{- \"[AVAILABLE_TOOLS]\" + t }}{{- \"[INST]\" + c + \"[/INST]\" }}",
            "{{- '[AVAILABLE_TOOLS] ' + t }}{{- '[INST] ' + c + '[/INST]' }}",
            "{{ '<start_of_turn>' + role + '\\n' + message['content'] | trim + '<end_of_turn>' }}",
            "{{ messages }}",
        };
        static const char *const pieces[] = {"<unk>", "<s>", "</s>", "<|im_start|>",
                                             "<|im_end|>", "\xe2\x96\x81hi", "S"};
        static const int32_t types[] = {2, 3, 3, 3, 3, 1, 1};
        for (size_t k = 0; k < sizeof tmpl / sizeof tmpl[0]; k++) {
            gw_init(&w);
            gw_header(&w, 3);
            gw_kv_str(&w, "tokenizer.ggml.model", "llama");
            gw_kv_array(&w, "tokenizer.ggml.tokens", BATON_GGUF_STRING, 7);
            for (size_t i = 0; i < 7; i++)
                gw_str(&w, pieces[i]);
            gw_kv_array(&w, "tokenizer.ggml.token_type", BATON_GGUF_I32, 7);
            for (size_t i = 0; i < 7; i++)
                gw_u32(&w, (uint32_t)types[i]);
            gw_kv_str(&w, "tokenizer.chat_template", tmpl[k]);
            gw_data_begin(&w, 32);
            gw_finish(&w);
            emit("gguf", w.p, w.len);
            gw_free(&w);
        }
    }

    /* version 1 (rejected) and a header alone */
    gw_init(&w);
    gw_header(&w, 1);
    gw_kv_u32(&w, "general.alignment", 32);
    gw_finish(&w);
    emit("gguf", w.p, w.len);
    gw_free(&w);
    gw_init(&w);
    gw_header(&w, 3);
    gw_finish(&w);
    emit("gguf", w.p, w.len);
    gw_free(&w);
}

static void gen_tokenizer(void)
{
    static const struct {
        uint8_t flags;
        const char *text;
        size_t len;
    } seeds[] = {
        {1, "Once upon a time, there was a little girl named Lily.", 0},
        {0, " leading and  double  spaces ", 0},
        {1, "", 0},
        {2, "the and in once up \xc3\xa9t\xc3\xa9 \xe6\x97\xa5\xe6\x9c\xac", 0},
        {3, "<s> </s> <unk> <0x41>", 0},
        {1, "bytes \x00\x01\xff\xfe end", 15},
        {0, "invalid utf-8 \xc3 \xe2\x96 \xf0\x9f\x98", 0},
        {4, "\x05\x00\x00\x00\x01\x00\x00\x00\xff\xff\xff\xff", 12},
        {6, "\x03\x01\x00\x00\x09\x00\x00\x00", 8},
        /* BPE (bit 3; bits 5-6: synthetic, gpt-2, llama-bpe, qwen2; bit 4:
         * parse special text) */
        {8, "the and thing 123 \xc3\xa9\n\n  x", 0},
        {8 | 16 | 1, "a<|endoftext|>b<|u|> the<|endoftext|>", 0},
        {8 | 32, "Hello world! It's 2024: don't   stop\n\n\t ok", 0},
        {8 | 64 | 1, "Hello, y'all! How are you \xf0\x9f\x98\x81 ?1314151\xe5\xa4\xa9 3333333", 0},
        {8 | 64 | 16, "<|begin_of_text|>hi<|eot_id|>\n\n   \n", 0},
        {8 | 96, "\xe6\x88\x91\xe6\x83\xb3 apple 1234 'RE 'll\r\n  \xc2\x85x", 0},
        {8 | 96 | 16, "<|im_start|>user\nhi<|im_end|>", 0},
        {8 | 32, "invalid \xc3 \xed\xa0\x80 \xc0\xaf \xf4\x90\x80\x80 \xff end", 0},
        {8 | 4, "\x05\x00\x00\x00\x0f\x01\x00\x00\xff\xff\xff\xff", 12},
        /* the synthetic BPE vocabulary's pre-tokenizer is chosen by the
         * text's length % 4: tekken (1), smollm (2), default (3) */
        {8, "HelloWorld camelCase \xc3\x9f" "Abc 12345 a/b\n", 0},
        {8, "the 1234567 and $100 +<=> x", 0},
        {8 | 1, "ing,,, 3.14159!! the  thing   ", 0},
        /* bit 7: baton_tokenize_spans and a chat layout (template 1 + length % 9:
         * 5-8 the Mistral ones, 9 gemma; a conversation's later turn when
         * length / 8 is odd) */
        {128 | 8 | 96 | 1, "hi <|im_end|> there<|im_start|>", 0},
        {128 | 8 | 64 | 1, "  <|eot_id|>Hello<|start_header_id|>  ", 0},
        {128 | 1, "<s> [INST] hi [/INST]</s>", 0},
        {128 | 8 | 16, "<|endoftext|>x<|u|>", 0},
        {128 | 8 | 96 | 1, "Hi <|im_end|> again!", 0},
        {128 | 1, "x </s> y <s> z", 0},
        {128 | 8 | 1, "x [INST] y z", 0},
        {128 | 1, "a</s>", 0},
        {128 | 8 | 64 | 1, "[SYSTEM_PROMPT]hi[INST]", 0},
        {128 | 16, "hi [/INST] yo", 0},
    };
    for (size_t i = 0; i < sizeof seeds / sizeof seeds[0]; i++) {
        struct buf b = {0};
        size_t len = seeds[i].len ? seeds[i].len : strlen(seeds[i].text);
        bu8(&b, seeds[i].flags);
        bput(&b, seeds[i].text, len);
        emit_buf("tokenizer", &b);
        bfree(&b);
    }
    /* every chat layout (1 + length % 9) as a first turn and as a later one
     * (length / 8 odd), on a text with gemma's markers and white space at
     * both ends (gemma trims it): lengths 36..71 picked so */
    for (size_t t = 0; t < 9; t++)
        for (size_t next = 0; next < 2; next++) {
            static const char base[] = "\t <start_of_turn>hi<end_of_turn>\n ";
            char text[80];
            size_t len = 36;
            struct buf b = {0};

            while (len % 9 != t || (len / 8) % 2 != next)
                len++;
            memset(text, 'x', sizeof text);
            memcpy(text, base, sizeof base - 1);
            text[len - 2] = ' ';
            text[len - 1] = '\n';
            bu8(&b, (uint8_t)(128 | (next ? 8 | 64 : 2) | 1));
            bput(&b, text, len);
            emit_buf("tokenizer", &b);
            bfree(&b);
        }
}

/* dispatcher records: u8 op, u16 len, payload */
static void rec(struct buf *b, uint8_t op, const struct buf *payload)
{
    bu8(b, op);
    bu16(b, (uint16_t)payload->len);
    bput(b, payload->p, payload->len);
}

static void rec_u64(struct buf *b, uint8_t op, uint64_t v)
{
    struct buf p = {0};
    bu64(&p, v);
    rec(b, op, &p);
    bfree(&p);
}

static void rec_empty(struct buf *b, uint8_t op)
{
    struct buf p = {0};
    rec(b, op, &p);
}

static void rec_set(struct buf *b, const struct baton_tensor_desc *t, uint64_t off, uint64_t n,
                    uint8_t fill)
{
    struct buf p = {0};
    tensor_desc(&p, t);
    bu64(&p, off);
    bu64(&p, n);
    for (uint64_t i = 0; i < n; i++)
        bu8(&p, (uint8_t)(fill + (fill ? i : 0)));
    rec(b, BATON_CMD_SET_TENSOR, &p);
    bfree(&p);
}

static void rec_set_i32(struct buf *b, const struct baton_tensor_desc *t, const int32_t *v,
                        size_t n)
{
    struct buf p = {0};
    tensor_desc(&p, t);
    bu64(&p, 0);
    bu64(&p, 4 * n);
    for (size_t i = 0; i < n; i++)
        bu32(&p, (uint32_t)v[i]);
    rec(b, BATON_CMD_SET_TENSOR, &p);
    bfree(&p);
}

static void rec_get(struct buf *b, const struct baton_tensor_desc *t, uint64_t off, uint64_t n)
{
    struct buf p = {0};
    tensor_desc(&p, t);
    bu64(&p, off);
    bu64(&p, n);
    rec(b, BATON_CMD_GET_TENSOR, &p);
    bfree(&p);
}

static void rec_graph(struct buf *b, const struct baton_graph *g)
{
    struct buf p = {0};
    graph_payload(&p, g);
    rec(b, BATON_CMD_GRAPH_COMPUTE, &p);
    bfree(&p);
}

/* A one-layer llama stage of graph_llama_ex's flags, run as two steps of 2
 * tokens (positions 0, 1 then 2, 3: the second reads the cells the first
 * wrote); the caller adds its reads and emits b. */
static void llama_two_steps(struct buf *b, struct graph_store *s, struct llama_seed *ls,
                            int flags)
{
    static const int32_t toks[2] = {1, 5}, poss[2] = {0, 1}, poss2[2] = {2, 3}, last[1] = {1};

    graph_llama_ex(s, ls, flags);
    bu8(b, 0);
    rec_u64(b, BATON_CMD_ALLOC_BUFFER, ls->bytes);
    rec_set(b, &ls->st.tok_embd, 0, ls->st.tok_embd.nbytes, 0x3b);
    rec_set_i32(b, &ls->st.io.tokens[0], toks, 2);
    rec_set_i32(b, &ls->st.io.pos, poss, 2);
    rec_set_i32(b, &ls->st.io.last_idx, last, 1);
    rec_graph(b, &s->gb.g);
    rec_set_i32(b, &ls->st.io.pos, poss2, 2);
    rec_graph(b, &s->gb.g);
}

static void gen_dispatcher(void)
{
    struct buf b = {0}, p = {0};
    struct graph_store s;
    struct llama_seed ls;

    /* DEVICE_INFO */
    bu8(&b, 0);
    rec_empty(&b, BATON_CMD_DEVICE_INFO);
    emit_buf("dispatcher", &b);
    b.len = 0;

    /* ALLOC, SET, GET, FREE, then GET of the freed buffer (stale) */
    struct baton_tensor_desc t = tensor(H0, 0, BATON_TYPE_F32, 16, 1, 1, 1);
    bu8(&b, 0);
    rec_u64(&b, BATON_CMD_ALLOC_BUFFER, 4096);
    rec_set(&b, &t, 0, 64, 1);
    rec_get(&b, &t, 8, 32);
    rec_u64(&b, BATON_CMD_FREE_BUFFER, H0);
    rec_get(&b, &t, 0, 64);
    rec_u64(&b, BATON_CMD_FREE_BUFFER, H0);
    emit_buf("dispatcher", &b);
    b.len = 0;

    /* two buffers: COPY, CLEAR, GET; a copy too large for its destination */
    struct baton_tensor_desc t2 = tensor(H1, 64, BATON_TYPE_F32, 16, 1, 1, 1);
    struct baton_tensor_desc big = tensor(H0, 0, BATON_TYPE_F32, 64, 1, 1, 1);
    bu8(&b, 0);
    rec_u64(&b, BATON_CMD_ALLOC_BUFFER, 1024);
    rec_u64(&b, BATON_CMD_ALLOC_BUFFER, 1024);
    /* the bytes around the copied range differ from it, so a copy one byte
     * off (or one byte long) changes a byte the shadow check sees */
    rec_set(&b, &big, 0, 256, 5);
    rec_set(&b, &t, 0, 64, 3);
    tensor_desc(&p, &t);
    tensor_desc(&p, &t2);
    rec(&b, BATON_CMD_COPY_TENSOR, &p);
    p.len = 0;
    tensor_desc(&p, &big);
    tensor_desc(&p, &t2);
    rec(&b, BATON_CMD_COPY_TENSOR, &p);
    p.len = 0;
    bu64(&p, H0);
    bu8(&p, 7);
    for (int i = 0; i < 7; i++)
        bu8(&p, 0);
    rec(&b, BATON_CMD_BUFFER_CLEAR, &p);
    p.len = 0;
    rec_get(&b, &t2, 0, 64);
    emit_buf("dispatcher", &b);
    b.len = 0;

    /* MUL_MAT + ADD + ARGMAX */
    graph_matmul(&s);
    bu8(&b, 0);
    rec_u64(&b, BATON_CMD_ALLOC_BUFFER, 4096);
    struct baton_tensor_desc wx = tensor(H0, 0, BATON_TYPE_F32, 4, 6, 1, 1);
    rec_set(&b, &wx, 0, 96, 0x3c);
    rec_graph(&b, &s.gb.g);
    rec_get(&b, &s.gb.g.leaves[2], 0, 8);
    emit_buf("dispatcher", &b);
    b.len = 0;

    /* K-quant weights: MUL_MAT (3 columns, 1 column) and GET_ROWS */
    for (uint32_t wt = BATON_TYPE_Q2_K; wt <= BATON_TYPE_Q6_K; wt++) {
        static const int32_t one[1] = {1};

        graph_matmul_k(&s, wt);
        bu8(&b, 0);
        rec_u64(&b, BATON_CMD_ALLOC_BUFFER, 16384);
        rec_set(&b, &s.gb.g.leaves[0], 0, s.gb.g.leaves[0].nbytes, 0x11);
        rec_set(&b, &s.gb.g.leaves[1], 0, 256, 0x3c);
        rec_set(&b, &s.gb.g.leaves[2], 0, 64, 0x3d);
        rec_set_i32(&b, &s.gb.g.leaves[3], one, 1);
        rec_graph(&b, &s.gb.g);
        rec_get(&b, &s.gb.g.leaves[4], 0, 24);
        rec_get(&b, &s.gb.g.leaves[6], 0, 64);
        emit_buf("dispatcher", &b);
        b.len = 0;
    }

    /* Q5_0 / Q5_1 weights (2 rows of 256 = 8 blocks), BF16, IQ4_NL and
     * IQ4_XS: the same graph */
    static const uint32_t more_wt[] = {BATON_TYPE_Q5_0, BATON_TYPE_Q5_1, BATON_TYPE_BF16,
                                       BATON_TYPE_IQ4_NL, BATON_TYPE_IQ4_XS};
    for (size_t wi = 0; wi < sizeof more_wt / sizeof more_wt[0]; wi++) {
        static const int32_t one[1] = {1};
        const uint32_t wt = more_wt[wi];

        graph_matmul_k(&s, wt);
        bu8(&b, 0);
        rec_u64(&b, BATON_CMD_ALLOC_BUFFER, 16384);
        rec_set(&b, &s.gb.g.leaves[0], 0, s.gb.g.leaves[0].nbytes, 0x11);
        rec_set(&b, &s.gb.g.leaves[1], 0, 256, 0x3c);
        rec_set(&b, &s.gb.g.leaves[2], 0, 64, 0x3d);
        rec_set_i32(&b, &s.gb.g.leaves[3], one, 1);
        rec_graph(&b, &s.gb.g);
        rec_get(&b, &s.gb.g.leaves[4], 0, 24);
        rec_get(&b, &s.gb.g.leaves[6], 0, 64);
        emit_buf("dispatcher", &b);
        b.len = 0;
    }

    /* NeoX RoPE and ROPE_FREQS computed, then read back */
    graph_rope_ext(&s);
    {
        static const int32_t pos2[2] = {0, 5};
        static const int32_t ff2[2] = {0x3f800000, 0x41000000}; /* 1.0f, 8.0f */

        bu8(&b, 0);
        rec_u64(&b, BATON_CMD_ALLOC_BUFFER, 4096);
        rec_set(&b, &s.gb.g.leaves[0], 0, 64, 0x3c);
        rec_set_i32(&b, &s.gb.g.leaves[1], pos2, 2);
        rec_set_i32(&b, &s.gb.g.leaves[2], ff2, 2);
        rec_graph(&b, &s.gb.g);
        rec_get(&b, &s.gb.g.leaves[3], 0, s.gb.g.leaves[3].nbytes);
        emit_buf("dispatcher", &b);
        b.len = 0;
    }

    /* the simple ops, ids in range, then out of range (E_INDEX) */
    graph_ops(&s);
    static const int32_t ids_ok[2] = {3, 1}, ids_bad[2] = {1, 4};
    bu8(&b, 0);
    rec_u64(&b, BATON_CMD_ALLOC_BUFFER, 4096);
    rec_set(&b, &s.gb.g.leaves[0], 0, 128, 0x41);
    rec_set_i32(&b, &s.gb.g.leaves[1], ids_ok, 2);
    rec_set_i32(&b, &s.gb.g.leaves[2], ids_ok, 2);
    rec_graph(&b, &s.gb.g);
    rec_get(&b, &s.gb.g.leaves[3], 0, s.gb.g.leaves[3].nbytes);
    rec_set_i32(&b, &s.gb.g.leaves[1], ids_bad, 2);
    rec_graph(&b, &s.gb.g);
    emit_buf("dispatcher", &b);
    b.len = 0;

    /* a whole llama layer: tokens, positions, last index, compute, argmax */
    graph_llama(&s, &ls);
    static const int32_t toks[2] = {1, 5}, poss[2] = {0, 1}, last[1] = {1};
    bu8(&b, 0);
    rec_u64(&b, BATON_CMD_ALLOC_BUFFER, ls.bytes);
    rec_set(&b, &ls.st.tok_embd, 0, ls.st.tok_embd.nbytes, 0x3b);
    rec_set_i32(&b, &ls.st.io.tokens[0], toks, 2);
    rec_set_i32(&b, &ls.st.io.pos, poss, 2);
    rec_set_i32(&b, &ls.st.io.last_idx, last, 1);
    rec_graph(&b, &s.gb.g);
    rec_get(&b, &ls.st.io.argmax, 0, 4);
    rec_get(&b, &ls.st.io.logits, 0, ls.st.io.logits.nbytes);
    emit_buf("dispatcher", &b);
    b.len = 0;

    /* the same layer with F16 KV caches (--kv-type f16): two steps, the
     * second reading the cells the first wrote */
    llama_two_steps(&b, &s, &ls, 2);
    rec_get(&b, &ls.st.io.argmax, 0, 4);
    rec_get(&b, &ls.layer.k_cache, 0, ls.layer.k_cache.nbytes);
    emit_buf("dispatcher", &b);
    b.len = 0;

    /* a gemma3 layer (GELU, a window of 1 cell, post norms): two steps */
    llama_two_steps(&b, &s, &ls, 4);
    rec_get(&b, &ls.st.io.logits, 0, ls.st.io.logits.nbytes);
    emit_buf("dispatcher", &b);
    b.len = 0;

    /* a second session uses the first one's live buffer: NOT_OWNED */
    struct buf child = {0};
    rec_u64(&child, BATON_CMD_ALLOC_BUFFER, 256);
    rec_set(&child, &t, 0, 64, 9);
    rec_get(&child, &t, 0, 64);
    rec_u64(&child, BATON_CMD_FREE_BUFFER, H0);
    rec_u64(&child, BATON_CMD_FREE_BUFFER, H1);
    bu8(&b, 0);
    rec_u64(&b, BATON_CMD_ALLOC_BUFFER, 256);
    rec(&b, 0, &child);
    rec_get(&b, &t, 0, 64);
    emit_buf("dispatcher", &b);
    b.len = 0;
    bfree(&child);

    /* every command id a record's op can name (1..15) once, including the
     * unsupported and fatal ones (gen_dispatcher_pipeline: the others) */
    bu8(&b, 0);
    for (uint8_t cmd = BATON_CMD_DEVICE_INFO; cmd <= BATON_CMD_PEER_FENCE; cmd++)
        rec_u64(&b, cmd, 0);
    rec_empty(&b, BATON_CMD_AUTH);
    emit_buf("dispatcher", &b);
    b.len = 0;

    /* without the automatic HELLO: a HELLO with a version range */
    bu8(&b, 2);
    hello(&p, 0, 5, BATON_ROLE_CLIENT, 1u << 7);
    rec(&b, BATON_CMD_HELLO, &p);
    p.len = 0;
    rec_empty(&b, BATON_CMD_DEVICE_INFO);
    emit_buf("dispatcher", &b);
    b.len = 0;

    /* raw: HELLO, DEVICE_INFO, ALLOC framed by hand, then a bad magic */
    bu8(&b, 1);
    header(&b, BATON_CMD_HELLO, 0, 1, 48);
    hello(&b, 1, 1, BATON_ROLE_CLIENT, 0);
    header(&b, BATON_CMD_DEVICE_INFO, 0, 2, 0);
    header(&b, BATON_CMD_ALLOC_BUFFER, 0, 3, 8);
    bu64(&b, 128);
    header(&b, BATON_CMD_SET_TENSOR, 0, 4, 104 + 16);
    struct baton_tensor_desc t4 = tensor(H0, 0, BATON_TYPE_F32, 4, 1, 1, 1);
    tensor_desc(&b, &t4);
    bu64(&b, 0);
    bu64(&b, 32); /* declares 32 bytes, sends 16: the next header is eaten */
    bu64(&b, 0);
    bu64(&b, 0);
    bput(&b, "BATX", 4);
    emit_buf("dispatcher", &b);
    bfree(&b);
    bfree(&p);
}

/* dispatcher keyed mode (fuzz_dispatcher.c): byte 0 bits and record op bits */
#define DSP_NO_HELLO 2u
#define DSP_KEYED 4u
#define DSP_ENCRYPT 8u
#define OP_FLIP 32u        /* keyed: flip a byte of the tagged frame; child: peer role */
#define OP_FLIP_BODY 64u   /* the last payload byte instead of a tag byte */
#define OP_FLIP_FIRST 128u /* the first payload byte instead of the last */

/* GRANT_WRITE record: handle, offset, length. */
static void rec_grant(struct buf *b, uint64_t handle, uint64_t off, uint64_t len)
{
    struct buf p = {0};
    bu64(&p, handle);
    bu64(&p, off);
    bu64(&p, len);
    rec(b, BATON_CMD_GRANT_WRITE, &p);
    bfree(&p);
}

/* PEER_WRITE record with the all-zero grant id, which the harness replaces
 * with the latest grant id of the input; n data bytes from fill, write
 * number seq. */
static void rec_peer_write(struct buf *b, uint8_t op, uint64_t off, uint64_t n, uint8_t fill,
                           uint64_t seq)
{
    struct buf p = {0};
    for (unsigned i = 0; i < BATON_GRANT_ID_BYTES; i++)
        bu8(&p, 0);
    bu64(&p, off);
    bu64(&p, n);
    bu64(&p, seq);
    for (uint64_t i = 0; i < n; i++)
        bu8(&p, (uint8_t)(fill + i));
    rec(b, (uint8_t)(BATON_CMD_PEER_WRITE | op), &p);
    bfree(&p);
}

/* PEER_FENCE record (peer role) with the all-zero grant id the harness
 * replaces: write seq will not come, for reason status. */
static void rec_peer_fence(struct buf *b, uint64_t seq, uint32_t status)
{
    struct buf p = {0};
    uint8_t f[BATON_PEER_FENCE_BYTES];
    struct baton_peer_fence pf = {.seq = seq, .status = status};
    baton_wire_encode_peer_fence(f, &pf);
    bput(&p, f, sizeof f);
    rec(b, BATON_CMD_PEER_FENCE, &p);
    bfree(&p);
}

/* A record whose payload is a SET_TENSOR (or GET_TENSOR) built by rec_set
 * (rec_get), sent with extra op bits (the flips of keyed mode). */
static void rec_with_op(struct buf *b, uint8_t op, const struct buf *one_record)
{
    bput(b, one_record->p, one_record->len);
    b->p[b->len - one_record->len] |= op;
}

/* Keyed mode: the real handshake, tagged and encrypted frames, frames with a
 * flipped byte, a peer-role second session writing into a grant, and a
 * handshake driven by the records. */
static void gen_dispatcher_keyed(void)
{
    struct buf b = {0}, p = {0}, r = {0}, child = {0};
    struct graph_store s;
    struct baton_tensor_desc t = tensor(H0, 0, BATON_TYPE_F32, 16, 1, 1, 1);
    struct baton_tensor_desc t2 = tensor(H1, 64, BATON_TYPE_F32, 16, 1, 1, 1);

    /* behind AUTH: DEVICE_INFO, ALLOC, SET, GET, GRANT, REVOKE (zero id),
     * FREE, then a GET of the freed buffer */
    bu8(&b, DSP_KEYED);
    rec_empty(&b, BATON_CMD_DEVICE_INFO);
    rec_u64(&b, BATON_CMD_ALLOC_BUFFER, 4096);
    rec_set(&b, &t, 0, 64, 1);
    rec_get(&b, &t, 8, 32);
    rec_grant(&b, H0, 0, 64);
    for (unsigned i = 0; i < BATON_GRANT_ID_BYTES; i++)
        bu8(&p, 0);
    rec(&b, BATON_CMD_REVOKE_GRANT, &p);
    p.len = 0;
    rec_u64(&b, BATON_CMD_FREE_BUFFER, H0);
    rec_get(&b, &t, 0, 64);
    emit_buf("dispatcher", &b);
    b.len = 0;

    /* frames past BATON_MAC_SMALL_BYTES, which src/auth/frame.c moves from
     * struct baton_mac's copy to libcrypto: an 8 KiB SET and its GET, then
     * the SET again with its last data byte flipped */
    struct baton_tensor_desc tb = tensor(H0, 0, BATON_TYPE_F32, 2048, 1, 1, 1);
    bu8(&b, DSP_KEYED);
    rec_u64(&b, BATON_CMD_ALLOC_BUFFER, 8192);
    rec_set(&b, &tb, 0, 8192, 7);
    rec_get(&b, &tb, 0, 8192);
    rec_set(&r, &tb, 0, 8192, 9);
    rec_with_op(&b, OP_FLIP | OP_FLIP_BODY, &r);
    r.len = 0;
    emit_buf("dispatcher", &b);
    b.len = 0;

    /* encrypted: two buffers, SET, COPY, GET, then MUL_MAT + ADD + ARGMAX */
    bu8(&b, DSP_KEYED | DSP_ENCRYPT);
    rec_u64(&b, BATON_CMD_ALLOC_BUFFER, 1024);
    rec_u64(&b, BATON_CMD_ALLOC_BUFFER, 1024);
    rec_set(&b, &t, 0, 64, 3);
    tensor_desc(&p, &t);
    tensor_desc(&p, &t2);
    rec(&b, BATON_CMD_COPY_TENSOR, &p);
    p.len = 0;
    rec_get(&b, &t2, 0, 64);
    graph_matmul(&s);
    struct baton_tensor_desc wx = tensor(H0, 0, BATON_TYPE_F32, 4, 6, 1, 1);
    rec_set(&b, &wx, 0, 96, 0x3c);
    rec_graph(&b, &s.gb.g);
    rec_get(&b, &s.gb.g.leaves[2], 0, 8);
    emit_buf("dispatcher", &b);
    b.len = 0;

    /* a flipped tag, last SET data byte, first GET byte (plain and
     * encrypted), and a flipped HELLO (refused from its header alone) */
    static const uint8_t flips[] = {OP_FLIP, OP_FLIP | OP_FLIP_BODY,
                                    OP_FLIP | OP_FLIP_BODY | OP_FLIP_FIRST};
    for (int mode = 0; mode < 2; mode++) {
        for (size_t f = 0; f < sizeof flips; f++) {
            bu8(&b, (uint8_t)(DSP_KEYED | (mode ? DSP_ENCRYPT : 0)));
            rec_u64(&b, BATON_CMD_ALLOC_BUFFER, 256);
            if (flips[f] & OP_FLIP_FIRST) {
                rec_set(&b, &t, 0, 64, 5);
                rec_get(&r, &t, 0, 64);
            } else {
                rec_set(&r, &t, 0, 64, 5);
            }
            rec_with_op(&b, flips[f], &r);
            r.len = 0;
            rec_get(&b, &t, 0, 64); /* never read */
            emit_buf("dispatcher", &b);
            b.len = 0;
        }
    }
    bu8(&b, DSP_KEYED);
    rec_empty(&b, BATON_CMD_DEVICE_INFO);
    hello(&p, 1, 1, BATON_ROLE_CLIENT, BATON_FEATURE_AUTH);
    rec(&b, BATON_CMD_HELLO | OP_FLIP, &p);
    p.len = 0;
    emit_buf("dispatcher", &b);
    b.len = 0;

    /* a peer-role second session writes into the first one's grant (the
     * harness puts the grant id in), fences, then a PEER_WRITE with a
     * flipped tag; the owner reads the bytes back */
    rec_peer_write(&child, 0, 8, 16, 0x30, 1);
    rec_peer_fence(&child, 2, (uint32_t)-BATON_E_FENCE);
    rec_peer_write(&child, OP_FLIP, 0, 8, 0x50, 3);
    bu8(&b, DSP_KEYED);
    rec_u64(&b, BATON_CMD_ALLOC_BUFFER, 256);
    rec_grant(&b, H0, 0, 64);
    rec(&b, OP_FLIP, &child); /* op 0 | OP_FLIP: second session, peer role */
    rec_get(&b, &t, 0, 64);
    emit_buf("dispatcher", &b);
    b.len = 0;
    child.len = 0;

    /* peer role: a PEER_WRITE whose grant id has a flipped byte (refused
     * before its tag is read), and a client command on a peer link */
    for (int k = 0; k < 2; k++) {
        if (k == 0)
            rec_peer_write(&child, OP_FLIP | OP_FLIP_BODY | OP_FLIP_FIRST, 0, 16, 0x70, 1);
        else
            rec_empty(&child, BATON_CMD_DEVICE_INFO);
        bu8(&b, DSP_KEYED | DSP_ENCRYPT);
        rec_u64(&b, BATON_CMD_ALLOC_BUFFER, 128);
        rec_grant(&b, H0, 32, 32);
        rec(&b, OP_FLIP, &child);
        rec_u64(&b, BATON_CMD_FREE_BUFFER, H0);
        emit_buf("dispatcher", &b);
        b.len = 0;
        child.len = 0;
    }

    /* the handshake from the records: HELLO, AUTH with the computed proof
     * (empty record), DEVICE_INFO; a wrong proof; no AUTH at all; a
     * peer-role HELLO (the peer key) */
    for (int k = 0; k < 4; k++) {
        bu8(&b, DSP_KEYED | DSP_NO_HELLO);
        hello(&p, 1, 1, k == 3 ? BATON_ROLE_PEER : BATON_ROLE_CLIENT, BATON_FEATURE_AUTH);
        rec(&b, BATON_CMD_HELLO, &p);
        p.len = 0;
        if (k == 1)
            for (unsigned i = 0; i < BATON_PROOF_BYTES; i++)
                bu8(&p, 0);
        if (k != 2)
            rec(&b, BATON_CMD_AUTH, &p);
        p.len = 0;
        if (k == 3)
            rec_peer_write(&b, 0, 0, 4, 1, 1);
        else
            rec_empty(&b, BATON_CMD_DEVICE_INFO);
        emit_buf("dispatcher", &b);
        b.len = 0;
    }

    /* raw bytes to the keyed server: a HELLO, then AUTH with a zero proof */
    bu8(&b, DSP_KEYED | 1);
    header(&b, BATON_CMD_HELLO, 0, 1, 48);
    hello(&b, 1, 1, BATON_ROLE_CLIENT, BATON_FEATURE_AUTH);
    header(&b, BATON_CMD_AUTH, 0, 2, 32);
    for (unsigned i = 0; i < BATON_PROOF_BYTES; i++)
        bu8(&b, 0);
    emit_buf("dispatcher", &b);

    bfree(&b);
    bfree(&p);
    bfree(&r);
    bfree(&child);
}

/* ---- lobby (fuzz/fuzz_lobby.c: byte 0 the configuration, then records) ---- */

/* Configuration byte: keyed, encrypt, max_unauthenticated 1/2/3/5 (index
 * cap), per address 1/2/3/8 (index per_ip), max_connections 1 + conns. */
static uint8_t lobby_cfg(int keyed, int encrypt, int cap, int per_ip, int conns)
{
    return (uint8_t)(keyed | encrypt << 1 | cap << 2 | per_ip << 4 | conns << 6);
}

enum { LB_OPEN, LB_DATA, LB_HELLO, LB_AUTH, LB_REST, LB_CLOSE, LB_TICK, LB_FLOOD };

/* Address argument of OPEN: family (0 none, 1 IPv4, 2 IPv6), host 0..3,
 * same64: another IPv6 host of the same /64. */
#define LB_V4(host) (1 | (host) << 2)
#define LB_V6(host, same64) (2 | (host) << 2 | (same64) << 4)
#define LB_NONE 0

static void lb(struct buf *b, int kind, int a)
{
    bu8(b, (uint8_t)(kind | a << 3));
}

/* A whole harness handshake on connection c: HELLO (versions 1..1, role
 * client or peer), then (keyed) AUTH with key k (0 client, 1 peer,
 * 2 alice, 3 a stranger's). */
static void lb_handshake(struct buf *b, int c, int peer, int keyed, int k)
{
    lb(b, LB_HELLO, c);
    bu8(b, (uint8_t)peer);
    if (keyed) {
        lb(b, LB_AUTH, c);
        bu8(b, (uint8_t)k);
    }
}

/* Raw bytes to connection c. */
static void lb_data(struct buf *b, int c, const struct buf *bytes)
{
    lb(b, LB_DATA, c);
    bu8(b, (uint8_t)bytes->len);
    bput(b, bytes->p, bytes->len);
}

static void gen_lobby(void)
{
    struct buf b = {0}, raw = {0};

    /* keyed handshakes that reach READY: client key, peer key, alice */
    for (int k = 0; k < 3; k++) {
        bu8(&b, lobby_cfg(1, k == 1, 1, 1, 0));
        lb(&b, LB_OPEN, LB_V4(0));
        lb_handshake(&b, 0, k == 1, 1, k);
        emit_buf("lobby", &b);
        bfree(&b);
    }
    /* alice's class holds one: her second connection gets E_LIMIT; the
     * unnamed class (max_connections 2) takes two, the third E_LIMIT;
     * closing a READY connection frees its slot for the next */
    bu8(&b, lobby_cfg(1, 0, 3, 3, 1));
    for (int c = 0; c < 4; c++)
        lb(&b, LB_OPEN, LB_V4(c));
    lb_handshake(&b, 0, 0, 1, 2);
    lb_handshake(&b, 1, 0, 1, 2);
    lb_handshake(&b, 2, 0, 1, 0);
    lb_handshake(&b, 3, 1, 1, 1);
    lb(&b, LB_OPEN, LB_V6(0, 0));
    lb_handshake(&b, 4, 0, 1, 0);
    lb(&b, LB_CLOSE, 2);
    lb(&b, LB_OPEN, LB_V6(1, 0));
    lb_handshake(&b, 5, 0, 1, 0);
    lb(&b, LB_CLOSE, 0);
    lb(&b, LB_OPEN, LB_V6(2, 0));
    lb_handshake(&b, 6, 0, 1, 2);
    emit_buf("lobby", &b);
    bfree(&b);
    /* refused proofs: a stranger's key, the peer key for a client, the
     * client key for a peer, a flipped proof byte */
    bu8(&b, lobby_cfg(1, 1, 3, 3, 0));
    for (int c = 0; c < 4; c++)
        lb(&b, LB_OPEN, LB_V4(c));
    lb_handshake(&b, 0, 0, 1, 3);
    lb_handshake(&b, 1, 0, 1, 1);
    lb_handshake(&b, 2, 1, 1, 0);
    lb_handshake(&b, 3, 0, 1, 4 | 5 << 4);
    emit_buf("lobby", &b);
    bfree(&b);
    /* HELLOs the responder refuses: role 0, role 3, no common version,
     * min > max; keyed and not */
    for (int keyed = 0; keyed < 2; keyed++) {
        bu8(&b, lobby_cfg(keyed, 0, 3, 3, 0));
        const uint8_t v[5] = {2, 3, 0 | 2 << 2, 0 | 3 << 2, 1 | 1 << 2};
        for (int c = 0; c < 5; c++) {
            lb(&b, LB_OPEN, LB_V4(c & 3));
            lb(&b, LB_HELLO, c);
            bu8(&b, v[c]);
        }
        emit_buf("lobby", &b);
        bfree(&b);
    }
    /* without keys: READY after HELLO up to max_connections (1), then
     * E_LIMIT; the peer role is unsupported; versions 1..9 accepted */
    bu8(&b, lobby_cfg(0, 0, 2, 3, 0));
    lb(&b, LB_OPEN, LB_V4(0));
    lb(&b, LB_HELLO, 0);
    bu8(&b, 1 << 2);
    lb(&b, LB_OPEN, LB_V4(1));
    lb(&b, LB_HELLO, 1);
    bu8(&b, 0);
    lb(&b, LB_OPEN, LB_V4(1));
    lb(&b, LB_HELLO, 2);
    bu8(&b, 1);
    lb(&b, LB_CLOSE, 0);
    lb(&b, LB_OPEN, LB_NONE);
    lb(&b, LB_HELLO, 3);
    bu8(&b, 0);
    emit_buf("lobby", &b);
    bfree(&b);
    /* split frames: HELLO in two pieces, AUTH in two, the rest completing
     * each; a piece of HELLO then the peer closing */
    bu8(&b, lobby_cfg(1, 0, 2, 3, 0));
    lb(&b, LB_OPEN, LB_V6(0, 0));
    lb(&b, LB_HELLO, 0);
    bu8(&b, 16);
    bu8(&b, 30);
    lb(&b, LB_REST, 0);
    lb(&b, LB_AUTH, 0);
    bu8(&b, 8);
    bu8(&b, 10);
    lb(&b, LB_REST, 0);
    lb(&b, LB_OPEN, LB_V6(1, 0));
    lb(&b, LB_HELLO, 1);
    bu8(&b, 16);
    bu8(&b, 5);
    lb(&b, LB_CLOSE, 1);
    emit_buf("lobby", &b);
    bfree(&b);
    /* deadlines: a connection with a partial frame (E_TIMEOUT), one with
     * nothing sent, one waiting for AUTH after its HELLO (no frame), one
     * opened later that outlives the first tick */
    bu8(&b, lobby_cfg(1, 0, 3, 3, 0));
    lb(&b, LB_OPEN, LB_V4(0));
    lb(&b, LB_HELLO, 0);
    bu8(&b, 16);
    bu8(&b, 40);
    lb(&b, LB_OPEN, LB_V4(1));
    lb(&b, LB_OPEN, LB_V4(2));
    lb(&b, LB_HELLO, 2);
    bu8(&b, 0);
    lb(&b, LB_TICK, 11); /* 600 ms */
    lb(&b, LB_OPEN, LB_V6(0, 0));
    lb(&b, LB_TICK, 7); /* 1000 ms: the first three expire, exactly at their deadline */
    lb(&b, LB_AUTH, 3);
    bu8(&b, 8);
    bu8(&b, 3);
    lb(&b, LB_TICK, 19); /* the last, inside its AUTH frame */
    emit_buf("lobby", &b);
    bfree(&b);
    /* one byte of a frame is inside it (E_TIMEOUT) */
    bu8(&b, lobby_cfg(0, 0, 1, 1, 0));
    lb(&b, LB_OPEN, LB_V4(0));
    bu8(&raw, 'B');
    lb_data(&b, 0, &raw);
    bfree(&raw);
    lb(&b, LB_TICK, 19);
    emit_buf("lobby", &b);
    bfree(&b);
    /* eviction by the per-address cap (1): a second connection from an
     * address evicts the first, also for an IPv6 /64 (another host of the
     * same /64) */
    bu8(&b, lobby_cfg(1, 0, 3, 0, 0));
    lb(&b, LB_OPEN, LB_V4(0));
    lb(&b, LB_OPEN, LB_V4(1));
    lb(&b, LB_OPEN, LB_V4(0));
    lb(&b, LB_OPEN, LB_V6(0, 0));
    lb(&b, LB_OPEN, LB_V6(0, 1));
    lb_handshake(&b, 2, 0, 1, 0);
    emit_buf("lobby", &b);
    bfree(&b);
    /* a full lobby (3) from several addresses: the newcomer evicts the
     * oldest entry of the address holding the most (itself counted);
     * ties go to the address with the oldest entry; connections with no
     * address (AF_UNIX-like) count as one address */
    bu8(&b, lobby_cfg(1, 0, 2, 3, 0));
    lb(&b, LB_OPEN, LB_V4(0));
    lb(&b, LB_OPEN, LB_V4(1));
    lb(&b, LB_OPEN, LB_V4(1));
    lb(&b, LB_OPEN, LB_V4(2)); /* evicts the oldest of host 1 */
    lb(&b, LB_OPEN, LB_V4(0)); /* host 0 now holds 2 with the newcomer */
    lb(&b, LB_OPEN, LB_NONE);
    lb(&b, LB_OPEN, LB_NONE);
    lb(&b, LB_OPEN, LB_NONE);
    lb(&b, LB_OPEN, LB_V6(3, 0));
    emit_buf("lobby", &b);
    bfree(&b);
    /* a flood from one address while an honest client handshakes: the
     * flood evicts its own connections */
    bu8(&b, lobby_cfg(1, 0, 3, 2, 0));
    lb(&b, LB_OPEN, LB_V6(1, 0));
    lb(&b, LB_HELLO, 0);
    bu8(&b, 0);
    lb(&b, LB_FLOOD, 7 | 2 << 3);
    lb(&b, LB_AUTH, 0);
    bu8(&b, 0);
    lb(&b, LB_FLOOD, 7 | 1 << 3);
    emit_buf("lobby", &b);
    bfree(&b);
    /* raw bytes: a valid HELLO without keys (READY through raw bytes); an
     * AUTH first (E_PROTO); a bad magic; a HELLO with the wrong length; a
     * header with a status; then (the lobby full) half a header and the
     * peer closing */
    bu8(&b, lobby_cfg(0, 0, 3, 3, 3));
    for (int c = 0; c < 5; c++)
        lb(&b, LB_OPEN, LB_V4(c & 3));
    header(&raw, BATON_CMD_HELLO, 0, 7, BATON_HELLO_BYTES);
    hello(&raw, 1, 1, BATON_ROLE_CLIENT, 0);
    lb_data(&b, 0, &raw);
    bfree(&raw);
    header(&raw, BATON_CMD_AUTH, 0, 1, BATON_PROOF_BYTES);
    lb_data(&b, 1, &raw);
    bfree(&raw);
    header(&raw, BATON_CMD_HELLO, 0, 1, BATON_HELLO_BYTES);
    raw.p[0] = 'X';
    lb_data(&b, 2, &raw);
    bfree(&raw);
    header(&raw, BATON_CMD_HELLO, 0, 1, BATON_HELLO_BYTES + 1);
    lb_data(&b, 3, &raw);
    bfree(&raw);
    header(&raw, BATON_CMD_HELLO, 3, 1, BATON_HELLO_BYTES);
    lb_data(&b, 4, &raw);
    bfree(&raw);
    lb(&b, LB_OPEN, LB_V6(0, 0));
    header(&raw, BATON_CMD_HELLO, 0, 1, BATON_HELLO_BYTES);
    raw.len = 10;
    lb_data(&b, 5, &raw);
    bfree(&raw);
    lb(&b, LB_CLOSE, 5);
    emit_buf("lobby", &b);
    bfree(&b);
    /* keyed, raw: a HELLO in raw bytes answered, then a raw AUTH with a
     * zero proof (E_AUTH), and one whose header says HELLO again */
    bu8(&b, lobby_cfg(1, 0, 2, 3, 0));
    lb(&b, LB_OPEN, LB_V4(0));
    lb(&b, LB_OPEN, LB_V4(1));
    for (int c = 0; c < 2; c++) {
        header(&raw, BATON_CMD_HELLO, 0, 1, BATON_HELLO_BYTES);
        hello(&raw, 1, 1, BATON_ROLE_CLIENT, BATON_FEATURE_AUTH);
        header(&raw, c ? BATON_CMD_HELLO : BATON_CMD_AUTH, 0, 2, BATON_PROOF_BYTES);
        for (unsigned k = 0; k < BATON_PROOF_BYTES; k++)
            bu8(&raw, 0);
        lb_data(&b, c, &raw);
        bfree(&raw);
    }
    emit_buf("lobby", &b);
    bfree(&b);
}

/* ---- the pipelined step: wire_peer, wire_run and dispatcher seeds ---- */

#define OP_EXT 64u /* dispatcher, with op & 15 == 0: a request whose cmd is the payload's
                      first byte (GRAPH_REGISTER .. COPY_ROUTE and beyond) */

static void grant_bytes(uint8_t id[BATON_GRANT_ID_BYTES], uint8_t first)
{
    for (unsigned i = 0; i < BATON_GRANT_ID_BYTES; i++)
        id[i] = (uint8_t)(first + i);
}

/* A COPY_TENSOR_TO destination: 127.0.0.1:7340, grant id from grant_first
 * (0: all zero), grant offset; family 0 (the query) when v4 is 0. */
static void peer_dest(struct buf *b, int v4, uint8_t grant_first, uint64_t grant_off)
{
    uint8_t p[BATON_PEER_DEST_BYTES];
    struct baton_peer_dest d;
    memset(&d, 0, sizeof d);
    if (v4) {
        d.family = BATON_PEER_FAMILY_IPV4;
        d.port = 7340;
        d.addr[0] = 127;
        d.addr[3] = 1;
        if (grant_first)
            grant_bytes(d.grant, grant_first);
        d.grant_offset = grant_off;
    }
    baton_wire_encode_peer_dest(p, &d);
    bput(b, p, sizeof p);
}

static void copy_options(struct buf *b, uint64_t seq, uint32_t flags)
{
    uint8_t p[BATON_COPY_OPTIONS_BYTES];
    struct baton_copy_options o = {.seq = seq, .flags = flags};
    baton_wire_encode_copy_options(p, &o);
    bput(b, p, sizeof p);
}

/* A whole COPY_TENSOR_TO payload (168 bytes): t[off, off + n) to 127.0.0.1
 * (or the query when v4 is 0), options seq and flags. */
static void copy_to(struct buf *b, const struct baton_tensor_desc *t, uint64_t off, uint64_t n,
                    int v4, uint64_t seq, uint32_t flags)
{
    tensor_desc(b, t);
    bu64(b, off);
    bu64(b, n);
    peer_dest(b, v4, 0x77, 0);
    copy_options(b, seq, flags);
}

static void run_header(struct buf *b, uint32_t graph, uint32_t flags, uint32_t n_fences,
                       uint32_t n_inputs)
{
    uint8_t p[BATON_RUN_HEADER_BYTES];
    struct baton_run_header h = {graph, flags, n_fences, n_inputs};
    baton_wire_encode_run_header(p, &h);
    bput(b, p, sizeof p);
}

/* A fence on grant id grant_first.. (0: the all-zero id, which the
 * dispatcher harness replaces with the latest grant id of the input). */
static void run_fence(struct buf *b, uint8_t grant_first, uint64_t seq)
{
    uint8_t p[BATON_RUN_FENCE_BYTES];
    struct baton_run_fence f;
    memset(&f, 0, sizeof f);
    if (grant_first)
        grant_bytes(f.grant, grant_first);
    f.seq = seq;
    baton_wire_encode_run_fence(p, &f);
    bput(b, p, sizeof p);
}

static void run_input(struct buf *b, uint32_t leaf, uint32_t count, int32_t first)
{
    uint8_t p[BATON_RUN_INPUT_BYTES];
    struct baton_run_input in = {leaf, count, first};
    baton_wire_encode_run_input(p, &in);
    bput(b, p, sizeof p);
}

static void run_handoff(struct buf *b, uint32_t route, uint32_t flags, uint64_t seq, uint64_t n)
{
    uint8_t p[BATON_RUN_HANDOFF_BYTES];
    struct baton_run_handoff h = {route, flags, seq, n};
    baton_wire_encode_run_handoff(p, &h);
    bput(b, p, sizeof p);
}

static void run_return(struct buf *b, uint32_t leaf)
{
    uint8_t p[BATON_RUN_RETURN_BYTES];
    struct baton_run_return r = {leaf};
    baton_wire_encode_run_return(p, &r);
    bput(b, p, sizeof p);
}

static void graph_id_record(struct buf *b, uint32_t id)
{
    uint8_t p[BATON_GRAPH_ID_BYTES];
    baton_wire_encode_graph_id(p, id);
    bput(b, p, sizeof p);
}

static void gen_wire_peer(void)
{
    struct buf b = {0};
    uint8_t p[BATON_PEER_WRITE_HEADER_BYTES];
    struct baton_peer_write_header w;
    struct baton_peer_fence f;
    struct baton_tensor_desc t = tensor(H0, 0, BATON_TYPE_F32, 16, 1, 1, 1);

    /* PEER_WRITE header (40 bytes), then with seq 0 */
    memset(&w, 0, sizeof w);
    grant_bytes(w.grant, 0x11);
    w.offset = 8;
    w.n = 256;
    w.seq = 1;
    baton_wire_encode_peer_write(p, &w);
    emit("wire_peer", p, sizeof p);
    w.seq = 0;
    baton_wire_encode_peer_write(p, &w);
    emit("wire_peer", p, sizeof p);

    /* PEER_FENCE (32 bytes), then with status 65536 */
    memset(&f, 0, sizeof f);
    grant_bytes(f.grant, 0x11);
    f.seq = 2;
    f.status = (uint32_t)-BATON_E_FENCE;
    baton_wire_encode_peer_fence(p, &f);
    emit("wire_peer", p, BATON_PEER_FENCE_BYTES);
    f.status = 65536;
    baton_wire_encode_peer_fence(p, &f);
    emit("wire_peer", p, BATON_PEER_FENCE_BYTES);

    /* options: an asynchronous copy's, a query's */
    copy_options(&b, 3, BATON_COPY_ASYNC);
    emit_buf("wire_peer", &b);
    b.len = 0;
    copy_options(&b, 0, 0);
    emit_buf("wire_peer", &b);
    b.len = 0;

    /* whole COPY_TENSOR_TO requests: an asynchronous copy, a synchronous
     * one, the query, and a copy without a sequence number */
    copy_to(&b, &t, 0, 64, 1, 1, BATON_COPY_ASYNC);
    emit_buf("wire_peer", &b);
    b.len = 0;
    copy_to(&b, &t, 16, 32, 1, 7, 0);
    emit_buf("wire_peer", &b);
    b.len = 0;
    copy_to(&b, &t, 0, 0, 0, 0, 0);
    emit_buf("wire_peer", &b);
    b.len = 0;
    copy_to(&b, &t, 0, 64, 1, 0, 0);
    emit_buf("wire_peer", &b);
    bfree(&b);
}

static void gen_wire_run(void)
{
    struct buf b = {0};

    /* id records: graph 1; a reserved byte set */
    graph_id_record(&b, 1);
    emit_buf("wire_run", &b);
    b.p[4] = 1;
    emit_buf("wire_run", &b);
    b.len = 0;

    /* a run with nothing but its graph id */
    run_header(&b, 1, 0, 0, 0);
    emit_buf("wire_run", &b);
    b.len = 0;

    /* every record: 2 fences, 2 inputs (one a negative value), hand-off,
     * return; then the same with one byte too many */
    run_header(&b, 2, BATON_RUN_RESET | BATON_RUN_HANDOFF | BATON_RUN_RETURN, 2, 2);
    run_fence(&b, 0x21, 1);
    run_fence(&b, 0x31, 5);
    run_input(&b, 1, 2, 7);
    run_input(&b, 2, 1, -1);
    run_handoff(&b, 1, BATON_COPY_ASYNC, 9, 64);
    run_return(&b, 3);
    emit_buf("wire_run", &b);
    bu8(&b, 0);
    emit_buf("wire_run", &b);
    b.len = 0;

    /* the maxima: 4 fences, 4 inputs whose last value is 2^31 - 1 */
    run_header(&b, UINT32_MAX, BATON_RUN_HANDOFF | BATON_RUN_RETURN, 4, 4);
    for (uint8_t i = 0; i < 4; i++)
        run_fence(&b, (uint8_t)(0x40 + 16 * i), UINT64_MAX - i);
    for (uint32_t i = 0; i < 4; i++)
        run_input(&b, i, 4 - i, INT32_MAX - 3 + (int32_t)i);
    run_handoff(&b, UINT32_MAX, 0, UINT64_MAX, UINT64_MAX);
    run_return(&b, UINT32_MAX);
    emit_buf("wire_run", &b);
    b.len = 0;

    /* refused: 5 fences; an input past 2^31 - 1; a hand-off flag 2 */
    run_header(&b, 1, 0, 5, 0);
    for (int i = 0; i < 5; i++)
        run_fence(&b, 0x21, 1);
    emit_buf("wire_run", &b);
    b.len = 0;
    run_header(&b, 1, 0, 0, 1);
    run_input(&b, 0, 2, INT32_MAX);
    emit_buf("wire_run", &b);
    b.len = 0;
    run_header(&b, 1, BATON_RUN_HANDOFF, 0, 0);
    run_handoff(&b, 1, 2, 1, 1);
    emit_buf("wire_run", &b);
    bfree(&b);
}

/* An extended dispatcher record: cmd, then the payload (op: the flip bits
 * of keyed mode, OP_FLIP and OP_FLIP_FIRST for the payload's last byte). */
static void rec_ext(struct buf *b, uint8_t op, uint8_t cmd, const struct buf *payload)
{
    bu8(b, (uint8_t)(OP_EXT | op));
    bu16(b, (uint16_t)(payload->len + 1));
    bu8(b, cmd);
    bput(b, payload->p, payload->len);
}

static void rec_ext_graph(struct buf *b, const struct baton_graph *g)
{
    struct buf p = {0};
    graph_payload(&p, g);
    rec_ext(b, 0, BATON_CMD_GRAPH_REGISTER, &p);
    bfree(&p);
}

static void rec_ext_id(struct buf *b, uint8_t cmd, uint32_t id)
{
    struct buf p = {0};
    graph_id_record(&p, id);
    rec_ext(b, 0, cmd, &p);
    bfree(&p);
}

/* COPY_ROUTE: tensor t to 127.0.0.1 (v4) or to no destination. */
static void rec_ext_route(struct buf *b, const struct baton_tensor_desc *t, int v4)
{
    struct buf p = {0};
    tensor_desc(&p, t);
    peer_dest(&p, v4, 0x77, 0);
    rec_ext(b, 0, BATON_CMD_COPY_ROUTE, &p);
    bfree(&p);
}

static void rec_copy_to(struct buf *b, const struct baton_tensor_desc *t, uint64_t off,
                        uint64_t n, int v4, uint64_t seq, uint32_t flags)
{
    struct buf p = {0};
    copy_to(&p, t, off, n, v4, seq, flags);
    rec(b, BATON_CMD_COPY_TENSOR_TO, &p);
    bfree(&p);
}

/* A GRAPH_RUN record: the run in *run (header and records), as built. */
static void rec_run(struct buf *b, struct buf *run)
{
    rec_ext(b, 0, BATON_CMD_GRAPH_RUN, run);
    run->len = 0;
}

/* GRAPH_RUN of graph 1 with at most one input, no fences: flags, the
 * input (count 0: none), the return leaf (with BATON_RUN_RETURN). */
static void rec_run1(struct buf *b, uint32_t flags, uint32_t in_leaf, uint32_t in_count,
                     int32_t in_first, uint32_t ret_leaf)
{
    struct buf r = {0};
    run_header(&r, 1, flags, 0, in_count ? 1 : 0);
    if (in_count)
        run_input(&r, in_leaf, in_count, in_first);
    if (flags & BATON_RUN_RETURN)
        run_return(&r, ret_leaf);
    rec_run(b, &r);
    bfree(&r);
}

/* The index of the leaf of g that is t (same buffer, offset, type). */
static uint32_t leaf_of(const struct baton_graph *g, const struct baton_tensor_desc *t)
{
    for (uint32_t i = 0; i < g->n_leaves; i++)
        if (g->leaves[i].buffer == t->buffer && g->leaves[i].offset == t->offset &&
            g->leaves[i].type == t->type)
            return i;
    fprintf(stderr, "gen_corpus: tensor is no leaf of the graph\n");
    exit(1);
}

static void gen_dispatcher_pipeline(void)
{
    struct buf b = {0}, p = {0}, r = {0}, child = {0};
    struct graph_store s;
    struct llama_seed ls;
    struct baton_tensor_desc t = tensor(H0, 0, BATON_TYPE_F32, 16, 1, 1, 1);
    struct baton_tensor_desc wx = tensor(H0, 0, BATON_TYPE_F32, 4, 6, 1, 1);

    /* graph_ops registered (leaf 0 table, 1 ids, 2 positions, 3 out): runs
     * that set the ids and return them, return the output; an F32 input
     * (E_TYPE) sets the latch, a run without RESET then fails (E_FENCE), one
     * with RESET runs; too many ids (E_BOUNDS), no such leaf (E_GRAPH), an
     * id out of range (E_INDEX); GRAPH_FREE, then the freed id everywhere */
    graph_ops(&s);
    bu8(&b, 0);
    rec_u64(&b, BATON_CMD_ALLOC_BUFFER, 4096);
    rec_set(&b, &s.gb.g.leaves[0], 0, 128, 0x41);
    rec_ext_graph(&b, &s.gb.g);
    run_header(&r, 1, BATON_RUN_RETURN, 0, 2);
    run_input(&r, 1, 2, 1);
    run_input(&r, 2, 2, 0);
    run_return(&r, 1);
    rec_run(&b, &r);
    rec_run1(&b, BATON_RUN_RETURN, 1, 2, 2, 3);
    rec_get(&b, &s.gb.g.leaves[3], 0, s.gb.g.leaves[3].nbytes);
    rec_run1(&b, 0, 0, 1, 0, 0);
    rec_run1(&b, BATON_RUN_RETURN, 0, 0, 0, 1);
    rec_run1(&b, BATON_RUN_RESET | BATON_RUN_RETURN, 0, 0, 0, 1);
    rec_run1(&b, BATON_RUN_RESET, 1, 3, 0, 0);
    rec_run1(&b, BATON_RUN_RESET, 9, 1, 0, 0);
    rec_run1(&b, BATON_RUN_RESET, 1, 2, 3, 0);
    rec_ext_id(&b, BATON_CMD_GRAPH_FREE, 1);
    rec_run1(&b, BATON_RUN_RESET, 0, 0, 0, 0);
    rec_ext_id(&b, BATON_CMD_GRAPH_FREE, 1);
    rec_ext_id(&b, BATON_CMD_GRAPH_FREE, 0);
    emit_buf("dispatcher", &b);
    b.len = 0;

    /* a one-layer llama stage registered once, then two decode steps that
     * set tokens, positions and the last index and return the argmax */
    graph_llama(&s, &ls);
    const struct baton_graph *lg = &s.gb.g;
    bu8(&b, 0);
    rec_u64(&b, BATON_CMD_ALLOC_BUFFER, ls.bytes);
    rec_set(&b, &ls.st.tok_embd, 0, ls.st.tok_embd.nbytes, 0x3b);
    rec_ext_graph(&b, lg);
    for (int32_t step = 0; step < 2; step++) {
        run_header(&r, 1, BATON_RUN_RETURN, 0, 3);
        run_input(&r, leaf_of(lg, &ls.st.io.tokens[0]), 2, 1 + step);
        run_input(&r, leaf_of(lg, &ls.st.io.pos), 2, 2 * step);
        run_input(&r, leaf_of(lg, &ls.st.io.last_idx), 1, 1);
        run_return(&r, leaf_of(lg, &ls.st.io.argmax));
        rec_run(&b, &r);
    }
    rec_get(&b, &ls.st.io.logits, 0, ls.st.io.logits.nbytes);
    emit_buf("dispatcher", &b);
    b.len = 0;

    /* hand-off: a route to 127.0.0.1 (not allow-listed: not done), a route
     * without a destination (E_INVAL); runs handing off synchronously,
     * asynchronously with a return, to route 2 (E_NOT_FOUND), too many
     * bytes (E_BOUNDS), and while the latch is set (the run fails, the
     * hand-off is cancelled); the counters; the route's buffer freed */
    graph_matmul(&s);
    bu8(&b, 0);
    rec_u64(&b, BATON_CMD_ALLOC_BUFFER, 4096);
    rec_set(&b, &wx, 0, 96, 0x3c);
    rec_ext_route(&b, &t, 1);
    rec_ext_route(&b, &t, 0);
    rec_ext_graph(&b, &s.gb.g);
    run_header(&r, 1, BATON_RUN_HANDOFF, 0, 0);
    run_handoff(&r, 1, 0, 1, 64);
    rec_run(&b, &r);
    run_header(&r, 1, BATON_RUN_HANDOFF | BATON_RUN_RETURN, 0, 0);
    run_handoff(&r, 1, BATON_COPY_ASYNC, 2, 32);
    run_return(&r, 2);
    rec_run(&b, &r);
    run_header(&r, 1, BATON_RUN_HANDOFF, 0, 0);
    run_handoff(&r, 2, 0, 3, 64);
    rec_run(&b, &r);
    run_header(&r, 1, BATON_RUN_RESET | BATON_RUN_HANDOFF, 0, 0);
    run_handoff(&r, 1, 0, 3, 65);
    rec_run(&b, &r);
    run_header(&r, 1, BATON_RUN_HANDOFF, 0, 0);
    run_handoff(&r, 1, 0, 3, 64);
    rec_run(&b, &r);
    rec_copy_to(&b, &t, 0, 0, 0, 0, 0);
    rec_u64(&b, BATON_CMD_FREE_BUFFER, H0);
    rec_u64(&b, BATON_CMD_ALLOC_BUFFER, 4096);
    run_header(&r, 1, BATON_RUN_RESET | BATON_RUN_HANDOFF, 0, 0);
    run_handoff(&r, 1, 0, 4, 64);
    rec_run(&b, &r);
    emit_buf("dispatcher", &b);
    b.len = 0;

    /* hand-off from a route whose buffer was freed after COPY_ROUTE: the run
     * succeeds, the hand-off is cancelled (here: not allow-listed) */
    struct baton_tensor_desc t2 = tensor(H1, 64, BATON_TYPE_F32, 16, 1, 1, 1);
    bu8(&b, 0);
    rec_u64(&b, BATON_CMD_ALLOC_BUFFER, 4096);
    rec_u64(&b, BATON_CMD_ALLOC_BUFFER, 256);
    rec_set(&b, &wx, 0, 96, 0x3c);
    rec_ext_route(&b, &t2, 1);
    rec_ext_graph(&b, &s.gb.g);
    rec_u64(&b, BATON_CMD_FREE_BUFFER, H1);
    run_header(&r, 1, BATON_RUN_HANDOFF, 0, 0);
    run_handoff(&r, 1, 0, 1, 64);
    rec_run(&b, &r);
    rec_copy_to(&b, &t, 0, 0, 0, 0, 0);
    emit_buf("dispatcher", &b);
    b.len = 0;

    /* fences without a peer: on the session's own grant (the harness puts
     * its id in) a write that never comes (1 ms, E_FENCE); on a grant that
     * does not exist (E_NOT_FOUND); a copy while the latch is set; a run
     * with RESET and no fence */
    bu8(&b, 0);
    rec_u64(&b, BATON_CMD_ALLOC_BUFFER, 4096);
    rec_set(&b, &wx, 0, 96, 0x3c);
    rec_grant(&b, H0, 0, 64);
    rec_ext_graph(&b, &s.gb.g);
    run_header(&r, 1, BATON_RUN_RETURN, 1, 0);
    run_fence(&r, 0, 1);
    run_return(&r, 2);
    rec_run(&b, &r);
    run_header(&r, 1, BATON_RUN_RESET, 1, 0);
    run_fence(&r, 0x99, 1);
    rec_run(&b, &r);
    rec_copy_to(&b, &t, 0, 64, 1, 1, 0);
    rec_run1(&b, BATON_RUN_RESET | BATON_RUN_RETURN, 0, 0, 0, 2);
    emit_buf("dispatcher", &b);
    b.len = 0;

    /* COPY_TENSOR_TO (168 bytes): synchronous, asynchronous, the query;
     * refused: a copy without seq, a query with seq, flag 2, the old
     * 152-byte request */
    bu8(&b, 0);
    rec_u64(&b, BATON_CMD_ALLOC_BUFFER, 256);
    rec_set(&b, &t, 0, 64, 1);
    rec_copy_to(&b, &t, 0, 64, 1, 1, 0);
    rec_copy_to(&b, &t, 8, 32, 1, 2, BATON_COPY_ASYNC);
    rec_copy_to(&b, &t, 0, 0, 0, 0, 0);
    rec_copy_to(&b, &t, 0, 64, 1, 0, 0);
    rec_copy_to(&b, &t, 0, 0, 0, 5, 0);
    rec_copy_to(&b, &t, 0, 64, 1, 3, 2);
    copy_to(&p, &t, 0, 64, 1, 4, 0);
    p.len -= BATON_COPY_OPTIONS_BYTES;
    rec(&b, BATON_CMD_COPY_TENSOR_TO, &p);
    p.len = 0;
    emit_buf("dispatcher", &b);
    b.len = 0;

    /* limits: 5 graphs (4 live at most), a freed id, the next id; 17 routes */
    bu8(&b, 0);
    rec_u64(&b, BATON_CMD_ALLOC_BUFFER, 4096);
    for (int i = 0; i < 5; i++)
        rec_ext_graph(&b, &s.gb.g);
    rec_ext_id(&b, BATON_CMD_GRAPH_FREE, 2);
    rec_ext_graph(&b, &s.gb.g);
    for (int i = 0; i < 17; i++)
        rec_ext_route(&b, &t, 1);
    emit_buf("dispatcher", &b);
    b.len = 0;

    /* every new command with an 8-byte payload, then a cmd no command has
     * (E_CMD ends the session) */
    bu8(&b, 0);
    rec_empty(&b, BATON_CMD_DEVICE_INFO);
    bu64(&p, 0);
    for (uint8_t cmd = BATON_CMD_GRAPH_REGISTER; cmd <= BATON_CMD_LIMIT; cmd++)
        rec_ext(&b, 0, cmd, &p);
    p.len = 0;
    rec_empty(&b, BATON_CMD_DEVICE_INFO);
    emit_buf("dispatcher", &b);
    b.len = 0;

    /* keyed (plain and encrypted): a peer-role second session writes write 1
     * into the first one's grant and cancels write 3; fenced runs on 1 (it
     * landed: runs), 3 (cancelled), 2 (can no longer come) and 4 (never
     * comes, 1 ms); the bytes received in the counters */
    for (int mode = 0; mode < 2; mode++) {
        rec_peer_write(&child, 0, 0, 64, 0x10, 1);
        rec_peer_fence(&child, 3, (uint32_t)-BATON_E_FENCE);
        bu8(&b, (uint8_t)(DSP_KEYED | (mode ? DSP_ENCRYPT : 0)));
        rec_u64(&b, BATON_CMD_ALLOC_BUFFER, 4096);
        rec_set(&b, &wx, 0, 96, 0x3c);
        rec_grant(&b, H0, 0, 64);
        rec_ext_graph(&b, &s.gb.g);
        rec(&b, OP_FLIP, &child);
        for (uint64_t seq = 1; seq <= 4; seq++) {
            run_header(&r, 1, seq == 1 ? BATON_RUN_RETURN : BATON_RUN_RESET, 1, 0);
            run_fence(&r, 0, seq == 1 ? 1 : seq == 2 ? 3 : seq == 3 ? 2 : 4);
            if (seq == 1)
                run_return(&r, 2);
            rec_run(&b, &r);
        }
        rec_copy_to(&b, &t, 0, 0, 0, 0, 0);
        emit_buf("dispatcher", &b);
        b.len = 0;
        child.len = 0;
    }

    /* keyed, flipped: a GRAPH_FREE's tag (a close without a reply), a cmd
     * no command has (E_CMD from the header), a PEER_FENCE on a client link
     * (E_PROTO from the header) */
    for (int k = 0; k < 3; k++) {
        bu8(&b, DSP_KEYED);
        rec_u64(&b, BATON_CMD_ALLOC_BUFFER, 256);
        bu64(&p, 1);
        if (k == 0) {
            rec_ext(&b, OP_FLIP, BATON_CMD_GRAPH_FREE, &p);
        } else if (k == 1) {
            rec_ext(&b, OP_FLIP | OP_FLIP_FIRST, 0x7f, &p);
        } else {
            rec_peer_fence(&r, 1, 1);
            rec_with_op(&b, OP_FLIP, &r);
            r.len = 0;
        }
        p.len = 0;
        rec_empty(&b, BATON_CMD_DEVICE_INFO);
        emit_buf("dispatcher", &b);
        b.len = 0;
    }

    bfree(&b);
    bfree(&p);
    bfree(&r);
    bfree(&child);
}

/* ---- dispatcher: the loopback peer, revoked grants (issue 16) ----
 * fuzz_dispatcher.c allow-lists 127.0.0.2:7341 and serves its links itself
 * (a socketpair into the same server), so a copy there lands in a grant of
 * the input; an all-zero destination grant id (and REVOKE_GRANT's) becomes
 * the latest grant id the input was given. */

/* COPY_TENSOR_TO record: t[off, off + n) to the loopback peer, into the
 * latest grant at grant_off; options seq and flags. */
static void rec_loop_copy(struct buf *b, const struct baton_tensor_desc *t, uint64_t off,
                          uint64_t n, uint64_t grant_off, uint64_t seq, uint32_t flags)
{
    struct buf p = {0};
    uint8_t d[BATON_PEER_DEST_BYTES];
    struct baton_peer_dest dest;
    memset(&dest, 0, sizeof dest);
    dest.family = BATON_PEER_FAMILY_IPV4;
    dest.port = 7341;
    dest.addr[0] = 127;
    dest.addr[3] = 2;
    dest.grant_offset = grant_off;
    tensor_desc(&p, t);
    bu64(&p, off);
    bu64(&p, n);
    baton_wire_encode_peer_dest(d, &dest);
    bput(&p, d, sizeof d);
    copy_options(&p, seq, flags);
    rec(b, BATON_CMD_COPY_TENSOR_TO, &p);
    bfree(&p);
}

/* REVOKE_GRANT record of the latest grant (the all-zero id). */
static void rec_revoke_latest(struct buf *b)
{
    struct buf p = {0};
    for (unsigned i = 0; i < BATON_GRANT_ID_BYTES; i++)
        bu8(&p, 0);
    rec(b, BATON_CMD_REVOKE_GRANT, &p);
    bfree(&p);
}

static void gen_dispatcher_loopback(void)
{
    struct buf b = {0}, child = {0}, p = {0};
    struct baton_tensor_desc src = tensor(H0, 0, BATON_TYPE_F32, 16, 1, 1, 1);
    struct baton_tensor_desc dst = tensor(H1, 1024, BATON_TYPE_F32, 64, 1, 1, 1);
    struct baton_tensor_desc other = tensor(H1, 0, BATON_TYPE_F32, 16, 1, 1, 1);

    /* keyed (and encrypted): a grant in the second buffer; a synchronous
     * copy into it (DONE), read back; an asynchronous one (sent at once by
     * the connection thread), a synchronous one after it, the counters;
     * the grant revoked, then a copy into it (refused), read back */
    for (int enc = 0; enc < 2; enc++) {
        bu8(&b, (uint8_t)(DSP_KEYED | (enc ? DSP_ENCRYPT : 0)));
        rec_u64(&b, BATON_CMD_ALLOC_BUFFER, 4096);
        rec_u64(&b, BATON_CMD_ALLOC_BUFFER, 4096);
        rec_set(&b, &src, 0, 64, 0x11);
        rec_grant(&b, H1, 1024, 256);
        rec_loop_copy(&b, &src, 0, 64, 16, 1, 0);
        rec_get(&b, &dst, 0, 128);
        rec_loop_copy(&b, &src, 8, 32, 128, 2, BATON_COPY_ASYNC);
        rec_loop_copy(&b, &src, 0, 16, 0, 3, 0);
        rec_get(&b, &dst, 0, 256);
        tensor_desc(&p, &src);
        bu64(&p, 0);
        bu64(&p, 0);
        peer_dest(&p, 0, 0, 0);
        copy_options(&p, 0, 0);
        rec(&b, BATON_CMD_COPY_TENSOR_TO, &p); /* the counters */
        p.len = 0;
        rec_revoke_latest(&b);
        rec_loop_copy(&b, &src, 0, 64, 16, 4, 0);
        rec_get(&b, &dst, 0, 256);
        emit_buf("dispatcher", &b);
        b.len = 0;
    }

    /* keyed: the first copy asynchronous (queued for the link's sender,
     * which dials), a synchronous one behind it; a write not newer than
     * the last (refused: the link closes), then one that dials again; a
     * copy past the grant's end (refused); the buffer freed under its
     * grant, then a copy (refused) */
    bu8(&b, DSP_KEYED);
    rec_u64(&b, BATON_CMD_ALLOC_BUFFER, 4096);
    rec_u64(&b, BATON_CMD_ALLOC_BUFFER, 4096);
    rec_set(&b, &src, 0, 64, 0x21);
    rec_grant(&b, H1, 1024, 256);
    rec_loop_copy(&b, &src, 0, 64, 0, 1, BATON_COPY_ASYNC);
    rec_loop_copy(&b, &src, 0, 32, 64, 2, 0);
    rec_loop_copy(&b, &src, 0, 32, 96, 2, 0);
    rec_loop_copy(&b, &src, 32, 32, 96, 5, 0);
    rec_loop_copy(&b, &src, 0, 64, 224, 6, 0);
    rec_get(&b, &dst, 0, 256);
    rec_u64(&b, BATON_CMD_FREE_BUFFER, H1);
    rec_loop_copy(&b, &src, 0, 16, 0, 7, 0);
    emit_buf("dispatcher", &b);
    b.len = 0;

    /* without keys the server holds no peer key: not dialled */
    bu8(&b, 0);
    rec_u64(&b, BATON_CMD_ALLOC_BUFFER, 4096);
    rec_u64(&b, BATON_CMD_ALLOC_BUFFER, 4096);
    rec_grant(&b, H1, 0, 64);
    rec_loop_copy(&b, &src, 0, 64, 0, 1, 0);
    emit_buf("dispatcher", &b);
    b.len = 0;

    /* revoke, then write: REVOKE_GRANT succeeds, a peer-role session's
     * PEER_WRITE into the revoked grant is refused, the owner reads zeros */
    rec_peer_write(&child, 0, 0, 16, 0x40, 1);
    bu8(&b, DSP_KEYED);
    rec_u64(&b, BATON_CMD_ALLOC_BUFFER, 256);
    rec_grant(&b, H0, 0, 64);
    rec_revoke_latest(&b);
    rec(&b, OP_FLIP, &child); /* second session, peer role */
    rec_get(&b, &src, 0, 64);
    emit_buf("dispatcher", &b);
    b.len = 0;

    /* write, revoke, write: a PEER_WRITE lands, the grant is revoked, a
     * copy from the loopback peer into it is refused, a second revoke of
     * it is refused; the owner reads the first write */
    child.len = 0;
    rec_peer_write(&child, 0, 8, 16, 0x60, 1);
    bu8(&b, DSP_KEYED);
    rec_u64(&b, BATON_CMD_ALLOC_BUFFER, 256);
    rec_u64(&b, BATON_CMD_ALLOC_BUFFER, 256);
    rec_grant(&b, H0, 0, 64);
    rec(&b, OP_FLIP, &child);
    rec_revoke_latest(&b);
    rec_loop_copy(&b, &other, 0, 16, 0, 2, 0);
    rec_revoke_latest(&b);
    rec_get(&b, &src, 0, 64);
    emit_buf("dispatcher", &b);

    bfree(&b);
    bfree(&child);
    bfree(&p);
}

/* ---- cli_args (fuzz_cli_args.c: byte 0 selects the parser, then text) ---- */

static void cli_seed(uint8_t mode, const char *text)
{
    struct buf b = {0};
    bu8(&b, mode);
    bput(&b, text, strlen(text));
    emit_buf("cli_args", &b);
    bfree(&b);
}

/* Integer mode byte: bit 6 u32, bits 0-2 min index, bits 3-5 max index
 * (min {0, 1, 2, 10, 4096, 65536, 2^32, 2^64-1}, max {0, 9, 100, 65535,
 * 2^32-1, 2^63-1, 2^64-2, 2^64-1}). */
static uint8_t cli_int(int u32, unsigned min_i, unsigned max_i)
{
    return (uint8_t)((u32 ? 0x40 : 0) | max_i << 3 | min_i);
}

/* Stage-list mode byte: bit 7, bits 0-1 servers_name, bit 2 split, bits 3-4 prog. */
static uint8_t cli_stages(unsigned name_i, int split, unsigned prog_i)
{
    return (uint8_t)(0x80 | name_i | (split ? 4 : 0) | prog_i << 3);
}

static void gen_cli_args(void)
{
    const uint8_t any64 = cli_int(0, 0, 7), run = cli_stages(1, 0, 1),
                  run_split = cli_stages(1, 1, 1);
    char list[64 * 24 + 32], host[160];
    size_t n = 0;

    /* integer values */
    cli_seed(any64, "18446744073709551615");        /* 2^64 - 1: accepted */
    cli_seed(any64, "18446744073709551616");        /* 2^64: too large */
    cli_seed(any64, "000000000000000000000018446744073709551615"); /* leading zeros */
    cli_seed(any64, "99999999999999999999999");
    cli_seed(cli_int(0, 1, 2), "-0");              /* [1, 100]: too small */
    cli_seed(cli_int(0, 0, 2), "-0");              /* [0, 100]: 0 */
    cli_seed(any64, "-5");
    cli_seed(cli_int(0, 3, 2), "9");               /* [10, 100]: too small */
    cli_seed(cli_int(0, 4, 5), "9223372036854775808"); /* [4096, 2^63-1]: too large */
    cli_seed(cli_int(1, 1, 3), "65535");           /* u32 [1, 65535] */
    cli_seed(cli_int(1, 1, 3), "65536");
    cli_seed(cli_int(1, 0, 4), "4294967296");      /* u32 [0, 2^32-1]: too large */
    cli_seed(any64, "0x10");
    cli_seed(any64, "+1");
    cli_seed(any64, " 1");
    cli_seed(any64, "1.5");
    cli_seed(any64, "");
    cli_seed(any64, "-");
    cli_seed(any64, "=4");                         /* "-n=4": write -n 4 */
    cli_seed(cli_int(1, 0, 2), "=");

    /* decimal values (bits 7-6 = 11; bits 0-1: [0, 100], (0, 1], [-1, 1],
     * (1e-3, 1e3]) */
    cli_seed(0xC0, "0.8");
    cli_seed(0xC0, "100");
    cli_seed(0xC0, "100.0000001");
    cli_seed(0xC1, "1");
    cli_seed(0xC1, "0");
    cli_seed(0xC1, "1e-6");
    cli_seed(0xC1, "1e-50");   /* in range, 0 as a float */
    cli_seed(0xC1, "0x1p-2");  /* a hex float */
    cli_seed(0xC0, "inf");
    cli_seed(0xC0, "nan");
    cli_seed(0xC0, " 1");
    cli_seed(0xC0, "+1");
    cli_seed(0xC2, "-0.5");
    cli_seed(0xC2, "-.5e0");
    cli_seed(0xC3, "1e309");   /* past DBL_MAX */
    cli_seed(0xC3, "5.");
    cli_seed(0xC3, ".");
    cli_seed(0xC3, "1e");

    /* stage lists: --servers, then LF and --split when bit 2 is set */
    cli_seed(run, "local");
    cli_seed(cli_stages(2, 1, 2), "local\n1,1,1");
    cli_seed(run, "127.0.0.1:7340,127.0.0.1:7341");
    cli_seed(run_split, "[::1]:7340,[::1]:7341@[fe80::1]:9000\n1,2");
    cli_seed(run_split, "a:1@b:2\n0.5");
    for (unsigned i = 1; i <= 65; i++) {
        n += (size_t)snprintf(list + n, sizeof list - n, "%s10.0.0.%u:%u", i > 1 ? "," : "", i,
                              7339 + i);
        if (i == 64)
            cli_seed(run, list); /* the most servers a run can have */
    }
    cli_seed(run, list); /* one too many */
    cli_seed(run, "a:1,,b:2");
    cli_seed(run, "");
    cli_seed(run, "a:1,");
    cli_seed(run_split, "a:1,b:2\n1,1,1");
    cli_seed(run_split, "a:1,b:2\n1,-1");
    cli_seed(run_split, "local\ninf");
    cli_seed(run_split, "a:1\n0x1p-1074");         /* hex: not a plain decimal */
    cli_seed(run_split, "local\n1e3");
    cli_seed(run_split, "a:1,b:2\n.5,2.");
    cli_seed(run_split, "local\n1000000,1000000.5"); /* each part at most 1e6 */
    cli_seed(cli_stages(2, 0, 1), "a:1,b:0");
    cli_seed(cli_stages(0, 0, 0), "host:99999");
    cli_seed(cli_stages(3, 0, 3), "nohostport");
    cli_seed(run, "[::1:80,[]:80");
    cli_seed(run, "a:1@nohost");
    cli_seed(run, "[fe80::1%eth0]:7340@[::ffff:10.0.0.1]:9000"); /* zone, dotted tail */
    cli_seed(run, "::1:7340");      /* IPv6 without brackets */
    cli_seed(run, "[a]b]:1");
    cli_seed(run, "a b:1");
    cli_seed(run, "a:1@b:2@c:3");   /* a second '@' */
    cli_seed(run, "[::1%]:1");      /* an empty zone */
    cli_seed(run, "local,127.0.0.1:7340"); /* 'local' mixed with a server */
    memset(host, 'h', 130);
    snprintf(host + 130, sizeof host - 130, ":1");
    cli_seed(run, host); /* an address of 128 bytes or more */
}

/* ---- meminfo (fuzz_meminfo.c: the /proc/meminfo text as is) ---- */

/* A real /proc/meminfo, captured literally (Linux 6.18, a 24 GiB KVM guest,
 * 2026-11-29): MemAvailable is the third line. */
static const char meminfo_real[] =
    "MemTotal:       24684096 kB\n"
    "MemFree:        20434136 kB\n"
    "MemAvailable:   24120384 kB\n"
    "Buffers:           75480 kB\n"
    "Cached:          3424888 kB\n"
    "SwapCached:            0 kB\n"
    "Active:          2031040 kB\n"
    "Inactive:        1471980 kB\n"
    "Active(anon):       1512 kB\n"
    "Inactive(anon):     9928 kB\n"
    "Active(file):    2029528 kB\n"
    "Inactive(file):  1462052 kB\n"
    "Unevictable:       11492 kB\n"
    "Mlocked:           10508 kB\n"
    "SwapTotal:             0 kB\n"
    "SwapFree:              0 kB\n"
    "Zswap:                 0 kB\n"
    "Zswapped:              0 kB\n"
    "Dirty:               736 kB\n"
    "Writeback:             0 kB\n"
    "AnonPages:         14144 kB\n"
    "Mapped:            15696 kB\n"
    "Shmem:              8788 kB\n"
    "KReclaimable:     595948 kB\n"
    "Slab:             648528 kB\n"
    "SReclaimable:     595948 kB\n"
    "SUnreclaim:        52580 kB\n"
    "KernelStack:        1296 kB\n"
    "PageTables:         1208 kB\n"
    "SecPageTables:         0 kB\n"
    "NFS_Unstable:          0 kB\n"
    "Bounce:                0 kB\n"
    "WritebackTmp:          0 kB\n"
    "CommitLimit:    12342048 kB\n"
    "Committed_AS:      58260 kB\n"
    "VmallocTotal:   34359738367 kB\n"
    "VmallocUsed:       14108 kB\n"
    "VmallocChunk:          0 kB\n"
    "Percpu:              904 kB\n"
    "AnonHugePages:         0 kB\n"
    "ShmemHugePages:        0 kB\n"
    "ShmemPmdMapped:        0 kB\n"
    "FileHugePages:    194560 kB\n"
    "FilePmdMapped:         0 kB\n"
    "Balloon:               0 kB\n"
    "HugePages_Total:       0\n"
    "HugePages_Free:        0\n"
    "HugePages_Rsvd:        0\n"
    "HugePages_Surp:        0\n"
    "Hugepagesize:       2048 kB\n"
    "Hugetlb:               0 kB\n"
    "DirectMap4k:       30720 kB\n"
    "DirectMap2M:     2066432 kB\n"
    "DirectMap1G:    25165824 kB\n";

static void meminfo_seed(const char *text)
{
    emit("meminfo", text, strlen(text));
}

/* ---- prompt_lines (fuzz_prompt_lines.c: a --prompt-file as is) ---- */
static void gen_prompt_lines(void)
{
    static const char *const seeds[] = {
        "Once upon a time\nTom and his dog went to the park\n",
        "no final newline",
        "crlf line\r\nsecond\r\n",
        "\n\n\r\n",
        "a\n\nb\n\n\nc",
        "\357\273\277BOM and UTF-8: caf\303\251\n",
        "lone\rCR inside\n",
        "old Mac\rCR only\rlines\r",
        "two CRs\r\r\nthen LF\n",
        "\357\273\277\r\n\357\273\277second BOM stays\n",
        "\357\273 half a BOM\n",
        " \t\r\t \r\n",
        /* shorter than a BOM: the streaming splitter (model/lines.h) waits
         * for a third byte only while the bytes could still be one */
        "\357\273",
        "hi",
        "\r",
    };
    static const char nul[] = "a\nb\0c\nd\n";

    for (size_t i = 0; i < sizeof(seeds) / sizeof(seeds[0]); i++)
        emit("prompt_lines", seeds[i], strlen(seeds[i]));
    emit("prompt_lines", nul, sizeof(nul) - 1);
}

static void gen_meminfo(void)
{
    const char *avail = strstr(meminfo_real, "MemAvailable:");
    const char *avail_end = strchr(avail, '\n') + 1;
    struct buf b = {0};

    meminfo_seed(meminfo_real);
    /* without the MemAvailable line (kernels before 3.14) */
    bput(&b, meminfo_real, (size_t)(avail - meminfo_real));
    bput(&b, avail_end, strlen(avail_end));
    emit_buf("meminfo", &b);
    bfree(&b);
    /* CRLF line endings: the CR is trailing text, so the line is malformed */
    for (const char *p = meminfo_real; *p; p++) {
        if (*p == '\n')
            bu8(&b, '\r');
        bu8(&b, (uint8_t)*p);
    }
    emit_buf("meminfo", &b);
    bfree(&b);
    /* the real text cut inside the MemAvailable line */
    emit("meminfo", meminfo_real, (size_t)(avail - meminfo_real) + 20);

    meminfo_seed("");
    meminfo_seed("MemTotal: 8 kB\nMemAvailable: 3 kB"); /* last line without LF */
    meminfo_seed("MemAvailable:3 kB\n");                /* no space: accepted */
    meminfo_seed("MemAvailable:   24040448 MB\n");      /* another unit */
    meminfo_seed("MemAvailable:   kB\n");               /* no count */
    meminfo_seed("MemAvailable:\t24040448 kB\n");       /* a tab */
    meminfo_seed("MemAvailable: -4 kB\nMemAvailable: 4 kB\n"); /* the first line decides */
    meminfo_seed(" MemAvailable: 4 kB\nXMemAvailable: 4 kB\n"); /* not at a line start */
    /* 2^54 - 1 kB, the largest count whose bytes fit, then 2^54 */
    meminfo_seed("MemAvailable: 18014398509481983 kB\n");
    meminfo_seed("MemAvailable: 0000018014398509481983 kB\n");
    meminfo_seed("MemAvailable: 18014398509481984 kB\n");
    /* overflow is decided on the digits, before the unit */
    meminfo_seed("MemAvailable: 99999999999999999999 MB\n");
}

/* ---- issue 16 targets: keyfile, batond_args, put_string ---- */

/* keyfile (fuzz_keyfile.c): flags byte, mode (LE16), uid (LE32), content. */
static void keyfile_seed(uint8_t flags, uint16_t mode, uint32_t uid, const void *content,
                         size_t n)
{
    struct buf b = {0};
    bu8(&b, flags);
    bu16(&b, mode);
    bu32(&b, uid);
    bput(&b, content, n);
    emit_buf("keyfile", &b);
    bfree(&b);
}

static void gen_keyfile(void)
{
    uint8_t key[BATON_KEY_BYTES + 1];
    for (size_t i = 0; i < sizeof key; i++)
        key[i] = (uint8_t)(i * 37 + 1);
    key[BATON_KEY_BYTES] = '\n';
    /* a good key file, pure and real, with each error buffer size */
    for (uint8_t e = 0; e < 4; e++) {
        keyfile_seed((uint8_t)(e << 4), 0600, 0, key, BATON_KEY_BYTES);
        keyfile_seed((uint8_t)(0x40 | e << 4), 0600, 0, key, BATON_KEY_BYTES);
    }
    /* a trailing newline, short, empty, long */
    keyfile_seed(0x70, 0600, 0, key, BATON_KEY_BYTES + 1);
    keyfile_seed(0x70, 0600, 0, key, 31);
    keyfile_seed(0x70, 0600, 0, key, 0);
    keyfile_seed(0x30, 0600, 0, key, 16);
    /* modes: group / other access, 0400, 0644; a credential's 0400, 0440,
     * 0460 (group write), 0500 (execute) */
    static const uint16_t modes[] = {0400, 0644, 0640, 0604, 0700, 0440, 0460, 0500, 04600, 0};
    for (size_t i = 0; i < sizeof modes / sizeof modes[0]; i++) {
        keyfile_seed(0x70, modes[i], 0, key, BATON_KEY_BYTES);
        keyfile_seed(0x71, modes[i], 0, key, BATON_KEY_BYTES);
    }
    /* owners: root, another uid, an explicit uid, as key file and credential */
    for (uint8_t o = 1; o < 4; o++) {
        keyfile_seed((uint8_t)(0x30 | o << 1), 0400, 12345, key, BATON_KEY_BYTES);
        keyfile_seed((uint8_t)(0x31 | o << 1), 0400, 0, key, BATON_KEY_BYTES);
    }
    /* not a regular file (pure), a symbolic link, a directory, a FIFO (real) */
    keyfile_seed(0x38, 0600, 0, key, BATON_KEY_BYTES);
    keyfile_seed(0xf0, 0600, 0, key, BATON_KEY_BYTES);
    keyfile_seed(0x78, 0700, 0, key, BATON_KEY_BYTES);
    keyfile_seed(0xf8, 0600, 0, key, 0);
}

/* batond_args (fuzz_batond_args.c): the arguments, NUL-separated. */
static void batond_seed(const char *const *args, size_t n)
{
    struct buf b = {0};
    for (size_t i = 0; i < n; i++) {
        if (i > 0)
            bu8(&b, 0);
        bput(&b, args[i], strlen(args[i]));
    }
    emit_buf("batond_args", &b);
    bfree(&b);
}

#define BATOND_SEED(...)                                                                          \
    do {                                                                                           \
        static const char *const a_[] = {__VA_ARGS__};                                             \
        batond_seed(a_, sizeof a_ / sizeof a_[0]);                                                 \
    } while (0)

static void gen_batond_args(void)
{
    BATOND_SEED("--help");
    BATOND_SEED("--version");
    BATOND_SEED("--port", "7341", "--threads", "4", "--quiet");
    BATOND_SEED("--port=0", "--port-file", "/tmp/batond.port", "--no-seccomp");
    BATOND_SEED("--host", "0.0.0.0", "--key", "/etc/baton/client.key", "--peer-key",
                "/etc/baton/peer.key", "--encrypt", "--peer", "10.0.0.2:7340", "--peer",
                "[::1]:7341");
    BATOND_SEED("--host", "::1", "--insecure-no-auth", "--print-policy");
    BATOND_SEED("--policy", "/etc/baton/batond.policy", "--max-connections", "16",
                "--handshake-timeout", "1s", "--session-memory-bytes", "8G");
    BATOND_SEED("--max_graph_flops=50T", "--max-message-bytes=1M", "--idle-timeout", "0",
                "--log-rate", "0", "--compute-slice=10ms", "--total-memory-bytes=auto");
    BATOND_SEED("--client", "team-a /etc/baton/team-a.key max_connections=8 "
                            "session_memory_bytes=8G",
                "--client", "team-b /etc/baton/team-b.key");
    BATOND_SEED("--log-format", "json", "--port", "65536");
    BATOND_SEED("--log-format=journal", "--threads", "0");
    BATOND_SEED("--log-format", "xml");
    BATOND_SEED("--quiet=1");
    BATOND_SEED("--key");
    BATOND_SEED("--max-connections", "--quiet");
    BATOND_SEED("--key", " leading-blank");
    BATOND_SEED("--key=--x", "--bind=127.0.0.1");
    BATOND_SEED("--nonsense", "1");
    BATOND_SEED("--peer", "[[1]:5");
    BATOND_SEED("--port", "-0", "--threads", "64", "--max-peer-links", "1024",
                "--max-grants-per-session", "65536");
}

/* put_string (fuzz_put_string.c): byte 0 bit 0 JSON, then the string. */
static void put_string_seed(int json, const void *s, size_t n)
{
    struct buf b = {0};
    bu8(&b, (uint8_t)json);
    bput(&b, s, n);
    emit_buf("put_string", &b);
    bfree(&b);
}

/* cli_args on/off values (fuzz_cli_args.c, byte 0 bits 7-5 = 111). */
static void gen_cli_args_onoff(void)
{
    static const char *const values[] = {"on", "off", "On", "yes", "1", "", "onn", "of", "on "};
    /* --kv-type values (bit 1) */
    static const char *const kv[] = {"f32", "f16", "F16", "f1", "f166", "q8_0", ""};
    for (size_t i = 0; i < sizeof values / sizeof values[0]; i++)
        for (uint8_t start = 0; start < 2; start++)
            cli_seed((uint8_t)(0xE0 | start), values[i]);
    for (size_t i = 0; i < sizeof kv / sizeof kv[0]; i++)
        for (uint8_t start = 0; start < 2; start++)
            cli_seed((uint8_t)(0xE2 | start), kv[i]);
}

static void gen_put_string(void)
{
    static const char *const texts[] = {
        "llama", "general.architecture", "a \"quoted\" \\ back\\slash", "tab\there\nnewline",
        "\x1b[31mred\x1b[0m", "bell\a del\x7f", "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80",
        ("csi \xc2\x9b" /* the escape ends here */ "31m c1 \xc2\x80 \xc2\x9f nbsp \xc2\xa0"),
        "bad \xff \xc0\xaf \xed\xa0\x80 \xf4\x90\x80\x80 cut \xe2\x82",
        "\xe2\x80\xae rtl override",
    };
    char big[200];
    for (size_t i = 0; i < sizeof texts / sizeof texts[0]; i++)
        for (int json = 0; json < 2; json++)
            put_string_seed(json, texts[i], strlen(texts[i]));
    put_string_seed(0, "", 0);
    put_string_seed(1, "nul\0inside", 10);
    /* 160 bytes shown in text mode: a sequence cut by the limit */
    memset(big, 'a', sizeof big);
    memcpy(big + 159, "\xc2\x9b", 2);
    put_string_seed(0, big, 161);
    memcpy(big + 159, "\xe2\x82\xac", 3);
    put_string_seed(0, big, 162);
    put_string_seed(1, big, 162);
    put_string_seed(0, big, 160);
}

/* ---- serve_req (fuzz_serve_req.c: byte 0 mode: 0 completion, 1 chat, 2
 * /tokenize, 3 /detokenize; then the body) ---- */
static void serve_req_seed(int mode, const char *body)
{
    struct buf b = {0};

    bu8(&b, (uint8_t)mode);
    bput(&b, body, strlen(body));
    emit_buf("serve_req", &b);
    bfree(&b);
}

static void gen_serve_req(void)
{
    /* /tokenize (byte 0 = 2) and /detokenize (3): every field, defaults,
     * escapes; refused: a missing or mistyped field, an id out of range */
    serve_req_seed(2, "{\"content\": \"Hello world<|im_end|> caf\\u00e9\", \"add_special\": true,"
                      " \"parse_special\": false, \"with_pieces\": true}");
    serve_req_seed(2, "{\"content\": \"\", \"add_special\": null}");
    serve_req_seed(2, "{\"content\": 5}");
    serve_req_seed(2, "{\"content\": \"a\", \"with_pieces\": 1}");
    serve_req_seed(3, "{\"tokens\": [9707, 1879, 151645, 0, 2147483647]}");
    serve_req_seed(3, "{\"tokens\": []}");
    serve_req_seed(3, "{\"tokens\": [1, -1]}");
    serve_req_seed(3, "{\"tokens\": [2147483648]}");
    serve_req_seed(3, "{\"tokens\": \"1 2\"}");
    /* accepted: every field, the other names, null fields, text parts */
    serve_req_seed(0, "{\"model\": \"stories260K\", \"prompt\": \"Once upon a time\","
                      " \"max_tokens\": 32, \"temperature\": 0.8, \"top_p\": 0.95, \"top_k\": 40,"
                      " \"seed\": 42, \"stream\": true, \"stop\": [], \"n\": 1,"
                      " \"logprobs\": 0, \"echo\": false}");
    serve_req_seed(0, "{\"prompt\": [\"caf\\u00e9 \\ud83d\\ude00\"], \"n_predict\": 1,"
                      " \"temperature\": 0, \"top_p\": 1, \"seed\": 9223372036854775807}");
    serve_req_seed(0, "{\"prompt\": \"\", \"max_completion_tokens\": 2147483647,"
                      " \"temperature\": null, \"stop\": \"\\n\", \"stream\": false}");
    /* stop strings: 4 with escapes (the most), null, one of 256 bytes */
    serve_req_seed(0, "{\"prompt\": \"a\", \"stop\": [\"User:\", \"caf\\u00e9\","
                      " \"\\ud83d\\ude00\", \"\\n\\n\"]}");
    serve_req_seed(1, "{\"messages\": [{\"role\": \"user\", \"content\": \"hi\"}],"
                      " \"stop\": null}");
    {
        char body[400];
        int n = snprintf(body, sizeof body, "{\"prompt\": \"a\", \"stop\": [\"");

        for (int i = 0; i < 256; i++)
            body[n++] = (char)('a' + i % 26);
        snprintf(body + n, sizeof body - (size_t)n, "\"]}");
        serve_req_seed(0, body);
        /* ... and 257 bytes: refused */
        snprintf(body + n, sizeof body - (size_t)n, "z\"]}");
        serve_req_seed(0, body);
    }
    serve_req_seed(1, "{\"model\": \"m\", \"messages\": [{\"role\": \"system\","
                      " \"content\": \"Be brief.\"}, {\"role\": \"user\", \"content\": \"Hi\"},"
                      " {\"role\": \"assistant\", \"content\": \"Hello!\"},"
                      " {\"role\": \"user\", \"content\": \"Tell me a story.\"}],"
                      " \"max_tokens\": 64, \"temperature\": 1.5, \"top_k\": 0, \"stream\": true,"
                      " \"logprobs\": false}");
    serve_req_seed(1, "{\"messages\": [{\"role\": \"user\", \"content\": [{\"type\": \"text\","
                      " \"text\": \"Once \"}, {\"type\": \"text\", \"text\": \"upon\"}]}],"
                      " \"top_p\": 1e-300, \"seed\": null}");
    /* refused: order rules, a part of another type, unsupported fields,
     * ranges, a duplicate key, not an object, an invalid UTF-8 string */
    serve_req_seed(1, "{\"messages\": [{\"role\": \"user\", \"content\": \"a\"},"
                      " {\"role\": \"user\", \"content\": \"b\"}]}");
    serve_req_seed(1, "{\"messages\": [{\"role\": \"user\", \"content\": \"a\"},"
                      " {\"role\": \"assistant\", \"content\": \"b\"}]}");
    serve_req_seed(1, "{\"messages\": [{\"role\": \"user\", \"content\": [{\"type\": \"text\","
                      " \"text\": \"x\"}, {\"type\": \"image_url\", \"image_url\":"
                      " {\"url\": \"u\"}}]}]}");
    serve_req_seed(1, "{\"messages\": [{\"role\": \"tool\", \"content\": \"x\"}]}");
    serve_req_seed(0, "{\"prompt\": \"a\", \"stop\": [\"\\n\"], \"n\": 2, \"echo\": true}");
    serve_req_seed(0, "{\"prompt\": \"a\", \"max_tokens\": 5.0, \"top_p\": 0}");
    serve_req_seed(0, "{\"prompt\": \"a\", \"max_tokens\": 5, \"n_predict\": 5}");
    serve_req_seed(0, "{\"prompt\": \"a\", \"prompt\": \"b\"}");
    serve_req_seed(0, "[\"prompt\", \"a\"]");
    serve_req_seed(0, "{\"prompt\": \"a\xE2\x82\"}");
    /* one refusal each: every field's rule (a body stops at its first) */
    {
        static const char *const completion[] = {
            "{\"prompt\": \"a\", \"temperature\": 100.5}",
            "{\"prompt\": \"a\", \"top_p\": \"1\"}",
            "{\"prompt\": \"a\", \"top_k\": -1}",
            "{\"prompt\": \"a\", \"seed\": -1}",
            "{\"prompt\": \"a\", \"stream\": 1}",
            "{\"prompt\": \"a\", \"stop\": 3}",
            "{\"prompt\": \"a\", \"stop\": \"\"}",
            "{\"prompt\": \"a\", \"stop\": [\"x\", \"\"]}",
            "{\"prompt\": \"a\", \"stop\": [\"x\", 1]}",
            "{\"prompt\": \"a\", \"stop\": [\"a\", \"b\", \"c\", \"d\", \"e\"]}",
            "{\"prompt\": \"a\", \"n\": 0}",
            "{\"prompt\": \"a\", \"n\": 2}",
            "{\"prompt\": \"a\", \"logprobs\": \"x\"}",
            "{\"prompt\": \"a\", \"logprobs\": 5}",
            "{\"prompt\": \"a\", \"echo\": 0}",
            "{\"prompt\": \"a\", \"echo\": true}",
            "{\"prompt\": [\"a\", \"b\"]}",
        };
        static const char *const chat[] = {
            "{\"messages\": []}",
            "{\"messages\": [\"hi\"]}",
            "{\"messages\": [{\"content\": \"hi\"}]}",
            "{\"messages\": [{\"role\": \"assistant\", \"content\": \"a\"}]}",
            ("{\"messages\": [{\"role\": \"user\", \"content\": \"a\"},"
             " {\"role\": \"system\", \"content\": \"s\"}]}"),
            "{\"messages\": [{\"role\": \"system\", \"content\": \"s\"}]}",
            "{\"messages\": [{\"role\": \"user\", \"content\": 3}]}",
            "{\"messages\": [{\"role\": \"user\", \"content\": [\"x\"]}]}",
            "{\"messages\": [{\"role\": \"user\", \"content\": [{\"text\": \"x\"}]}]}",
            "{\"messages\": [{\"role\": \"user\", \"content\": [{\"type\": \"text\"}]}]}",
        };

        for (size_t i = 0; i < sizeof completion / sizeof completion[0]; i++)
            serve_req_seed(0, completion[i]);
        for (size_t i = 0; i < sizeof chat / sizeof chat[0]; i++)
            serve_req_seed(1, chat[i]);
    }
    /* one message more than BATON_SERVE_MAX_MESSAGES (1024): E_LIMIT */
    {
        struct buf b = {0};

        bu8(&b, 1);
        bput(&b, "{\"messages\": [{}", 16);
        for (int i = 1; i < 1025; i++)
            bput(&b, ",{}", 3);
        bput(&b, "]}", 2);
        emit_buf("serve_req", &b);
        bfree(&b);
    }
    /* the edges of Table 3-7: E0, ED, F0, F4 with their second bytes */
    serve_req_seed(0, "\xE0\xA0\x80\xE0\x9F\xED\x9F\xBF\xED\xA0\xF0\x90\x80\x80\xF0\x8F"
                      "\xF4\x8F\xBF\xBF\xF4\x90\xC2");
    /* the UTF-8 rules: Unicode's example of maximal subparts (Table 3-8) */
    serve_req_seed(0, "\x61\xF1\x80\x80\xE1\x80\xC2\x62\x80\x63\x80\xBF\x64\xF0\x9F");
}

/* ---- --check: every committed file named by its hash ---- */

/* Inputs that fuzz/grow.sh added (fuzz/README.md) sit beside the generated
 * seeds under the same naming; a file with a hash-shaped name (32 lowercase
 * hex digits) that is not the hash of its bytes (an edited seed) fails the
 * check. A hand-written seed may have a name that says what it is
 * (corpus/policy/client-lines). Returns the count of such files and prints
 * each; *n_files gets the count of files seen. */
static int check_names(const char *dir, int *n_files)
{
    int bad = 0;
    DIR *top = opendir(dir);
    struct dirent *t;
    *n_files = 0;
    if (top == NULL)
        return 0;
    while ((t = readdir(top)) != NULL) {
        char sub[4096];
        DIR *d;
        struct dirent *e;
        if (t->d_name[0] == '.')
            continue;
        snprintf(sub, sizeof sub, "%s/%s", dir, t->d_name);
        if ((d = opendir(sub)) == NULL)
            continue;
        while ((e = readdir(d)) != NULL) {
            char path[8300], name[33];
            unsigned char h[16], chunk[65536];
            crypto_generichash_state st;
            size_t k;
            FILE *f;
            if (e->d_name[0] == '.' || strlen(e->d_name) != 32 ||
                strspn(e->d_name, "0123456789abcdef") != 32)
                continue;
            snprintf(path, sizeof path, "%s/%s", sub, e->d_name);
            if ((f = fopen(path, "rb")) == NULL)
                continue;
            crypto_generichash_init(&st, NULL, 0, sizeof h);
            while ((k = fread(chunk, 1, sizeof chunk, f)) > 0)
                crypto_generichash_update(&st, chunk, k);
            fclose(f);
            crypto_generichash_final(&st, h, sizeof h);
            for (int i = 0; i < 16; i++)
                snprintf(name + 2 * i, 3, "%02x", h[i]);
            (*n_files)++;
            if (strcmp(name, e->d_name) != 0) {
                fprintf(stderr, "gen_corpus: %s: not named by its BLAKE2b-128 hash (%s)\n", path,
                        name);
                bad++;
            }
        }
        closedir(d);
    }
    closedir(top);
    return bad;
}

int main(int argc, char **argv)
{
    if (argc == 3 && strcmp(argv[1], "--check") == 0) {
        check_mode = 1;
        out_dir = argv[2];
    } else if (argc == 2) {
        out_dir = argv[1];
    } else {
        fprintf(stderr, "usage: %s OUTDIR | --check DIR\n", argv[0]);
        return 2;
    }
    if (sodium_init() < 0)
        return 1;
    gen_wire_header();
    gen_wire_hello();
    gen_wire_tensor();
    gen_wire_graph();
    gen_client_replies();
    gen_gguf();
    gen_tokenizer();
    gen_dispatcher();
    gen_dispatcher_keyed();
    gen_wire_peer();
    gen_wire_run();
    gen_dispatcher_pipeline();
    gen_dispatcher_loopback();
    gen_cli_args();
    gen_meminfo();
    gen_prompt_lines();
    gen_keyfile();
    gen_batond_args();
    gen_put_string();
    gen_cli_args_onoff();
    gen_lobby();
    gen_serve_req();
    if (check_mode) {
        if (n_missing) {
            fprintf(stderr,
                    "gen_corpus: %d seeds missing: regenerate with "
                    "`cmake --build BUILD --target fuzz-corpus`\n",
                    n_missing);
            return 1;
        }
        int n_files = 0, bad = check_names(out_dir, &n_files);
        if (bad) {
            fprintf(stderr, "gen_corpus: %d file(s) not named by their hash\n", bad);
            return 1;
        }
        printf("gen_corpus: every seed present; %d hash-named files, each the hash of its bytes\n",
               n_files);
        return 0;
    }
    printf("gen_corpus: %d seeds written under %s\n", n_written, out_dir);
    return 0;
}
