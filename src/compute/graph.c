/* Graph validation, scratch layout, execution and cost estimate
 * (compute.h; op semantics in src/core/ops.h). */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "baton/status.h"
#include "compute/compute.h"
#include "core/access.h"
#include "compute/cpu/kernels.h"
#include "compute/cpu/matmul.h"
#include "compute/cpu/quant.h"
#include "core/limits.h"

#define SCRATCH_ALIGN 64u

/* Type and shape of a source or result. */
struct tview {
    uint32_t type;
    uint64_t ne[BATON_MAX_DIMS];
};

/* Per-node facts needed only while validating. */
struct node_tmp {
    uint32_t last_use;   /* last node that reads this node's scratch result */
    uint64_t work_bytes; /* ATTENTION score rows */
};

/* Parameters each op reads; the others must be 0 (room to extend). */
static const uint8_t op_n_params[BATON_OP_COUNT] = {
    [BATON_OP_RMS_NORM] = 1, [BATON_OP_SCALE] = 1, [BATON_OP_ROPE] = 4, [BATON_OP_ATTENTION] = 3,
    [BATON_OP_ROPE_FREQS] = 4,
};

static float param_f32(uint32_t bits)
{
    float f;

    memcpy(&f, &bits, sizeof(f));
    return f;
}

static int mul_u64(uint64_t a, uint64_t b, uint64_t *r)
{
    return __builtin_mul_overflow(a, b, r) ? BATON_E_OVERFLOW : 0;
}

/* x rounded up to SCRATCH_ALIGN, or BATON_E_OVERFLOW (proven, access.h). */
static int align_up(uint64_t x, uint64_t *r)
{
    return baton_access_round_up(x, SCRATCH_ALIGN, r);
}

static int numel(const uint64_t ne[BATON_MAX_DIMS], uint64_t *n)
{
    uint64_t r = 1;
    int i;

    for (i = 0; i < BATON_MAX_DIMS; i++)
        if (mul_u64(r, ne[i], &r))
            return BATON_E_OVERFLOW;
    *n = r;
    return 0;
}

static int same_ne(const uint64_t a[BATON_MAX_DIMS], const uint64_t b[BATON_MAX_DIMS])
{
    return a[0] == b[0] && a[1] == b[1] && a[2] == b[2] && a[3] == b[3];
}

static int shape_is(const struct tview *v, uint64_t n0, uint64_t n1, uint64_t n2, uint64_t n3)
{
    return v->ne[0] == n0 && v->ne[1] == n1 && v->ne[2] == n2 && v->ne[3] == n3;
}

/* Byte size of a contiguous tensor of a known type; fills its strides. */
static int contiguous(uint32_t type, const uint64_t ne[BATON_MAX_DIMS], uint64_t nb[BATON_MAX_DIMS],
                      uint64_t *nbytes)
{
    const struct baton_type_info *ti = baton_type_get(type);
    uint64_t s;
    int i;

    if (!ti)
        return BATON_E_TYPE;
    for (i = 0; i < BATON_MAX_DIMS; i++)
        if (ne[i] > BATON_MAX_DIM_ELEMS)
            return BATON_E_LIMIT;
    if (ne[0] % ti->block_elems != 0)
        return BATON_E_SHAPE;
    nb[0] = ti->block_bytes;
    if (mul_u64(ti->block_bytes, ne[0] / ti->block_elems, &s))
        return BATON_E_OVERFLOW;
    nb[1] = s;
    for (i = 2; i < BATON_MAX_DIMS; i++) {
        if (mul_u64(nb[i - 1], ne[i - 1], &s))
            return BATON_E_OVERFLOW;
        nb[i] = s;
    }
    if (mul_u64(nb[3], ne[3], &s))
        return BATON_E_OVERFLOW;
    *nbytes = s;
    return 0;
}

/* Re-checks what the wire decoder promised about a leaf: known type,
 * contiguous strides, nbytes equal to the extent. */
static int check_leaf(const struct baton_tensor_desc *t)
{
    uint64_t nb[BATON_MAX_DIMS], nbytes;
    int rc = contiguous(t->type, t->ne, nb, &nbytes);

    if (rc)
        return rc;
    if (nbytes != t->nbytes || nb[0] != t->nb[0] || nb[1] != t->nb[1] || nb[2] != t->nb[2] ||
        nb[3] != t->nb[3])
        return BATON_E_SHAPE;
    return 0;
}

/* The tensor an index names as seen by node `node_index`: a leaf, or an
 * earlier node (already validated). */
static int source_view(const struct baton_graph *g, uint32_t idx, uint32_t node_index,
                       struct tview *v)
{
    if (idx < g->n_leaves) {
        const struct baton_tensor_desc *t = &g->leaves[idx];
        int rc = check_leaf(t);

        if (rc)
            return rc;
        v->type = t->type;
        memcpy(v->ne, t->ne, sizeof(v->ne));
        return 0;
    }
    uint32_t j = 0;
    int rc = baton_access_node_ref(idx, g->n_leaves, node_index, &j);

    if (rc)
        return rc;
    v->type = g->nodes[j].type;
    memcpy(v->ne, g->nodes[j].ne, sizeof(v->ne));
    return 0;
}

/* Follows a RESHAPE to the tensor it aliases (one step: roots are stored
 * already resolved in plan[].scratch_offset). */
static uint32_t resolve(const struct baton_graph *g, const struct baton_node_plan *plan,
                        uint32_t idx)
{
    if (idx >= g->n_leaves && g->nodes[idx - g->n_leaves].op == BATON_OP_RESHAPE)
        return (uint32_t)plan[idx - g->n_leaves].scratch_offset;
    return idx;
}

/* The leaf whose memory holds tensor idx, or BATON_SRC_NONE for scratch. */
static uint32_t storage_leaf(const struct baton_graph *g, const struct baton_node_plan *plan,
                             uint32_t idx)
{
    idx = resolve(g, plan, idx);
    if (idx < g->n_leaves)
        return idx;
    return g->nodes[idx - g->n_leaves].out_leaf;
}

/* Weight types MUL_MAT's src0 and GET_ROWS's table may have (the kernels
 * of compute/cpu/matmul.h); every other operand is F32 or I32. */
static int weight_type(uint32_t type)
{
    return type == BATON_TYPE_F32 || type == BATON_TYPE_F16 || type == BATON_TYPE_BF16 ||
           type == BATON_TYPE_Q8_0 || type == BATON_TYPE_Q4_0 || type == BATON_TYPE_Q5_0 ||
           type == BATON_TYPE_Q5_1 || type == BATON_TYPE_IQ4_NL || baton_cpu_type_is_k(type);
}

static int all_f32(const struct tview *s, uint32_t n)
{
    uint32_t i;

    for (i = 0; i < n; i++)
        if (s[i].type != BATON_TYPE_F32)
            return 0;
    return 1;
}

/* See compute.h. */
uint64_t baton_attention_work_bytes(uint64_t hd, uint64_t nh, uint64_t nt, uint64_t n_ctx,
                                   int cache_f16)
{
    uint64_t slots, w, conv;

    if (mul_u64(nh, nt, &slots))
        return UINT64_MAX;
    if (slots > BATON_POOL_MAX_THREADS)
        slots = BATON_POOL_MAX_THREADS;
    if (hd == 0)
        slots = 0; /* nothing to score */
    /* score rows shared by the chunks (kernels.h, baton_cpu_attention) */
    if (mul_u64(slots, n_ctx, &w) || mul_u64(w, sizeof(float), &w))
        return UINT64_MAX;
    /* F16 caches: a window of converted rows per chunk (kernels.h) */
    if (cache_f16 && (mul_u64(slots, (uint64_t)BATON_CPU_ATT_F16_ROWS * sizeof(float), &conv) ||
                      mul_u64(conv, hd, &conv) || w > UINT64_MAX - conv))
        return UINT64_MAX;
    return cache_f16 ? w + conv : w;
}

/* Op rules of ops.h: source types (BATON_E_TYPE), shapes (BATON_E_SHAPE),
 * parameters (BATON_E_INVAL, or BATON_E_UNSUPPORTED for a mode this build
 * does not run). Fills the result the op produces. */
static int infer(const struct baton_graph_node *n, const struct tview *s, struct tview *res,
                 uint64_t *work_bytes)
{
    const uint32_t *p = n->params;
    uint32_t i;

    for (i = op_n_params[n->op]; i < BATON_N_PARAMS; i++)
        if (p[i] != 0)
            return BATON_E_INVAL;
    *work_bytes = 0;
    res->type = BATON_TYPE_F32;
    switch (n->op) {
    case BATON_OP_GET_ROWS:
        if (!weight_type(s[0].type) || s[1].type != BATON_TYPE_I32)
            return BATON_E_TYPE;
        if (s[0].ne[2] != 1 || s[0].ne[3] != 1 || !shape_is(&s[1], s[1].ne[0], 1, 1, 1))
            return BATON_E_SHAPE;
        if (baton_cpu_type_is_k(s[0].type) && s[0].ne[0] % BATON_QK_K != 0)
            return BATON_E_SHAPE; /* also a contiguity rule (block of 256) */
        res->ne[0] = s[0].ne[0];
        res->ne[1] = s[1].ne[0];
        res->ne[2] = 1;
        res->ne[3] = 1;
        return 0;
    case BATON_OP_RMS_NORM: {
        const float eps = param_f32(p[0]);

        if (!all_f32(s, 1))
            return BATON_E_TYPE;
        if (!isfinite(eps) || !(eps >= 0.0f))
            return BATON_E_INVAL;
        memcpy(res->ne, s[0].ne, sizeof(res->ne));
        return 0;
    }
    case BATON_OP_MUL_MAT: {
        uint64_t m;

        if (!weight_type(s[0].type) || s[1].type != BATON_TYPE_F32)
            return BATON_E_TYPE;
        if (s[0].ne[2] != 1 || s[0].ne[3] != 1 || s[1].ne[0] != s[0].ne[0])
            return BATON_E_SHAPE;
        if (baton_cpu_type_is_k(s[0].type) && s[0].ne[0] % BATON_QK_K != 0)
            return BATON_E_SHAPE; /* also a contiguity rule (block of 256) */
        res->ne[0] = s[0].ne[1];
        res->ne[1] = s[1].ne[1];
        res->ne[2] = s[1].ne[2];
        res->ne[3] = s[1].ne[3];
        /* Q8_0 / Q4_0 / Q5_0 / Q5_1 weights: x's columns quantized per block (src0's
         * ne[0] is a multiple of 32: its contiguity was checked); K-quant
         * weights: per super-block of 256 (checked above) */
        if (mul_u64(s[1].ne[1], s[1].ne[2], &m) || mul_u64(m, s[1].ne[3], &m))
            return BATON_E_OVERFLOW;
        *work_bytes = baton_cpu_mul_mat_work_bytes(s[0].type, s[0].ne[0], m);
        if (*work_bytes == UINT64_MAX)
            return BATON_E_OVERFLOW;
        return 0;
    }
    case BATON_OP_ADD:
    case BATON_OP_MUL:
        if (!all_f32(s, 2))
            return BATON_E_TYPE;
        for (i = 0; i < BATON_MAX_DIMS; i++)
            if (s[1].ne[i] != s[0].ne[i] && s[1].ne[i] != 1)
                return BATON_E_SHAPE;
        memcpy(res->ne, s[0].ne, sizeof(res->ne));
        return 0;
    case BATON_OP_SCALE:
        if (!all_f32(s, 1))
            return BATON_E_TYPE;
        if (!isfinite(param_f32(p[0])))
            return BATON_E_INVAL;
        memcpy(res->ne, s[0].ne, sizeof(res->ne));
        return 0;
    case BATON_OP_SILU:
    case BATON_OP_GELU:
        if (!all_f32(s, 1))
            return BATON_E_TYPE;
        memcpy(res->ne, s[0].ne, sizeof(res->ne));
        return 0;
    case BATON_OP_ROPE:
    case BATON_OP_ROPE_FREQS: {
        const float base = param_f32(p[1]), freq_scale = param_f32(p[3]);
        const int ff = n->op == BATON_OP_ROPE_FREQS;

        if (s[0].type != BATON_TYPE_F32 || s[1].type != BATON_TYPE_I32 ||
            (ff && s[2].type != BATON_TYPE_F32))
            return BATON_E_TYPE;
        if (s[0].ne[3] != 1 || !shape_is(&s[1], s[0].ne[2], 1, 1, 1) ||
            (ff && !shape_is(&s[2], p[0] / 2, 1, 1, 1)))
            return BATON_E_SHAPE;
        if (p[2] != 0 && p[2] != 2) /* normal or NeoX (core/ops.h) */
            return BATON_E_UNSUPPORTED;
        if (p[0] == 0 || p[0] % 2 != 0 || p[0] > s[0].ne[0] || !isfinite(base) ||
            !(base > 0.0f) || (p[3] != 0 && !(isfinite(freq_scale) && freq_scale > 0.0f)))
            return BATON_E_INVAL;
        memcpy(res->ne, s[0].ne, sizeof(res->ne));
        return 0;
    }
    case BATON_OP_ATTENTION: {
        const uint64_t hd = s[0].ne[0], nh = s[0].ne[1], nt = s[0].ne[2];
        const uint64_t nkv = s[1].ne[1], n_ctx = s[3].ne[1];
        const float scale = param_f32(p[0]);
        uint64_t w;

        /* the caches: both F32 or both F16 (rounded when written) */
        if (!all_f32(s, 3) || s[3].type != s[4].type ||
            (s[3].type != BATON_TYPE_F32 && s[3].type != BATON_TYPE_F16) ||
            s[5].type != BATON_TYPE_I32)
            return BATON_E_TYPE;
        if (!shape_is(&s[0], hd, nh, nt, 1) || !shape_is(&s[1], hd, nkv, nt, 1) ||
            !same_ne(s[2].ne, s[1].ne) || !shape_is(&s[3], hd, n_ctx, nkv, 1) ||
            !same_ne(s[4].ne, s[3].ne) ||
            (!shape_is(&s[5], nt, 1, 1, 1) && !shape_is(&s[5], nt, 3, 1, 1)))
            return BATON_E_SHAPE;
        if (nkv == 0 || nh % nkv != 0)
            return BATON_E_SHAPE;
        if (p[1] > 1)
            return BATON_E_UNSUPPORTED;
        if (!isfinite(scale) || (p[1] == 1 && scale == 0.0f))
            return BATON_E_INVAL;
        memcpy(res->ne, s[0].ne, sizeof(res->ne));
        w = baton_attention_work_bytes(hd, nh, nt, n_ctx, s[3].type == BATON_TYPE_F16);
        if (w == UINT64_MAX)
            return BATON_E_OVERFLOW;
        *work_bytes = w;
        return 0;
    }
    case BATON_OP_SAMPLE:
    case BATON_OP_ARGMAX: {
        /* a token id per row of x {K,M}: I32 {M} */
        const int sample = n->op == BATON_OP_SAMPLE;

        if (!all_f32(s, 1) || (sample && s[1].type != BATON_TYPE_I32))
            return BATON_E_TYPE;
        if (s[0].ne[2] != 1 || s[0].ne[3] != 1 || s[0].ne[0] == 0 || s[0].ne[0] > INT32_MAX ||
            (sample && !shape_is(&s[1], 6, s[0].ne[1], 1, 1)))
            return BATON_E_SHAPE;
        res->type = BATON_TYPE_I32;
        res->ne[0] = s[0].ne[1];
        res->ne[1] = 1;
        res->ne[2] = 1;
        res->ne[3] = 1;
        /* SAMPLE: the candidates of the rows drawn at once (kernels.h) */
        if (sample && mul_u64(baton_cpu_sample_work_entries(s[0].ne[0], s[0].ne[1]),
                              sizeof(struct baton_cpu_sample_entry), work_bytes))
            return BATON_E_OVERFLOW;
        return 0;
    }
    case BATON_OP_RESHAPE: {
        uint64_t a, b;

        if (numel(s[0].ne, &a) || numel(n->ne, &b))
            return BATON_E_OVERFLOW;
        if (a != b)
            return BATON_E_SHAPE;
        res->type = s[0].type;
        memcpy(res->ne, n->ne, sizeof(res->ne));
        return 0;
    }
    default:
        return BATON_E_GRAPH;
    }
}

static int validate_node(const struct baton_graph *g, uint32_t i, struct baton_node_plan *plan,
                         struct node_tmp *tmp)
{
    const struct baton_graph_node *n = &g->nodes[i];
    const uint32_t arity = baton_op_arity(n->op);
    const struct baton_type_info *ti;
    struct tview src[BATON_MAX_SRC], res;
    uint64_t nb[BATON_MAX_DIMS], nbytes, work = 0;
    uint32_t s;
    int rc;

    /* every index the node holds (proven, core/access.h): used sources a
     * leaf or an earlier node, unused ones NONE, the out leaf a leaf */
    rc = baton_access_node_srcs(n->src, arity, g->n_leaves, i);
    if (rc)
        return rc;
    rc = baton_access_out_leaf(n->out_leaf, g->n_leaves);
    if (rc)
        return rc;
    if (n->op == BATON_OP_RESHAPE && n->out_leaf != BATON_SRC_NONE)
        return BATON_E_GRAPH;
    if (n->op == BATON_OP_ATTENTION) {
        /* The caches are written: they must be leaves, distinct, and hold
         * no other source of this node. */
        rc = baton_access_cache_leaves(n->src[3], n->src[4], g->n_leaves);
        if (rc)
            return rc;
    }

    for (s = 0; s < arity; s++) {
        rc = source_view(g, n->src[s], i, &src[s]);
        if (rc)
            return rc;
        ti = baton_type_get(src[s].type);
        if (!ti)
            return BATON_E_TYPE;
        if (!ti->executable)
            return BATON_E_UNSUPPORTED;
    }
    ti = baton_type_get(n->type);
    if (!ti)
        return BATON_E_TYPE;
    if (!ti->executable)
        return BATON_E_UNSUPPORTED;
    for (s = 0; s < BATON_MAX_DIMS; s++)
        if (n->ne[s] > BATON_MAX_DIM_ELEMS)
            return BATON_E_LIMIT;

    rc = infer(n, src, &res, &work);
    if (rc)
        return rc;
    if (res.type != n->type)
        return BATON_E_TYPE;
    if (!same_ne(res.ne, n->ne))
        return BATON_E_SHAPE;
    rc = contiguous(n->type, n->ne, nb, &nbytes);
    if (rc)
        return rc;
    if (nbytes > SIZE_MAX)
        return BATON_E_OVERFLOW;

    plan[i].nbytes = nbytes;
    plan[i].scratch_offset = 0;
    tmp[i].last_use = i;
    tmp[i].work_bytes = work;
    if (n->op == BATON_OP_RESHAPE)
        plan[i].scratch_offset = resolve(g, plan, n->src[0]);

    if (n->out_leaf != BATON_SRC_NONE) {
        const struct baton_tensor_desc *o = &g->leaves[n->out_leaf];

        rc = check_leaf(o);
        if (rc)
            return rc;
        if (o->type != n->type)
            return BATON_E_TYPE;
        if (!same_ne(o->ne, n->ne))
            return BATON_E_SHAPE;
        for (s = 0; s < arity; s++)
            if (storage_leaf(g, plan, n->src[s]) == n->out_leaf)
                return BATON_E_GRAPH;
    }
    if (n->op == BATON_OP_ATTENTION) {
        for (s = 0; s < arity; s++) {
            uint32_t leaf;

            if (s == 3 || s == 4)
                continue;
            leaf = storage_leaf(g, plan, n->src[s]);
            if (leaf == n->src[3] || leaf == n->src[4])
                return BATON_E_GRAPH;
        }
    }

    /* A node's scratch result lives until its last reader; a reader of a
     * RESHAPE reads the tensor the RESHAPE aliases. */
    for (s = 0; s < arity; s++) {
        const uint32_t idx = resolve(g, plan, n->src[s]);

        if (idx >= g->n_leaves)
            tmp[idx - g->n_leaves].last_use = i;
    }
    return 0;
}

struct live_block {
    uint64_t off, end;
    uint32_t node;
};

/* First-fit placement of each node's scratch block (its result unless it
 * has an out leaf, then ATTENTION's score rows) among the blocks still
 * live; a block is released after its node's last reader ran. Offsets are
 * multiples of 64. */
static int layout(const struct baton_graph *g, struct baton_node_plan *plan,
                  const struct node_tmp *tmp, struct live_block *live, uint64_t *scratch_bytes)
{
    uint64_t peak = 0;
    uint32_t i, n_live = 0;
    int rc;

    for (i = 0; i < g->n_nodes; i++) {
        const struct baton_graph_node *n = &g->nodes[i];
        uint64_t size = 0, cand = 0, end;
        uint32_t k, w;

        for (k = 0, w = 0; k < n_live; k++) {
            const uint32_t j = live[k].node;
            const uint32_t free_after =
                g->nodes[j].out_leaf != BATON_SRC_NONE ? j : tmp[j].last_use;

            if (free_after >= i)
                live[w++] = live[k];
        }
        n_live = w;

        if (n->op == BATON_OP_RESHAPE)
            continue;
        if (n->out_leaf == BATON_SRC_NONE) {
            rc = align_up(plan[i].nbytes, &size);
            if (rc)
                return rc;
        }
        if (tmp[i].work_bytes > UINT64_MAX - size)
            return BATON_E_OVERFLOW;
        size += tmp[i].work_bytes;
        if (size == 0)
            continue;

        for (k = 0; k < n_live; k++) {
            if (live[k].off >= cand && live[k].off - cand >= size)
                break;
            rc = align_up(live[k].end, &end);
            if (rc)
                return rc;
            if (end > cand)
                cand = end;
        }
        /* [cand, end) ends by peak, which only grows (proven, access.h):
         * every block lies inside the arena of peak bytes */
        rc = baton_access_place(cand, size, &end, &peak);
        if (rc)
            return rc;
        memmove(&live[k + 1], &live[k], (n_live - k) * sizeof(*live));
        live[k].off = cand;
        live[k].end = end;
        live[k].node = i;
        n_live++;
        plan[i].scratch_offset = cand;
    }
    rc = align_up(peak, &peak);
    if (rc)
        return rc;
    if (peak > SIZE_MAX)
        return BATON_E_OVERFLOW;
    *scratch_bytes = peak;
    return 0;
}

/* 1 if leaves a and b name overlapping bytes of one buffer. Handles are
 * opaque: equal handles are one buffer, different handles different
 * buffers. The overlap test is exact (proven; no sum that could wrap). */
static int leaves_overlap(const struct baton_tensor_desc *a, const struct baton_tensor_desc *b)
{
    if (a->buffer != b->buffer)
        return 0;
    return baton_access_overlap(a->offset, a->nbytes, b->offset, b->nbytes);
}

/* A leaf that the graph writes (an out leaf, or an ATTENTION KV cache) may
 * not share a byte with any other leaf: a kernel that checks indices (ids,
 * positions) and then writes could otherwise overwrite indices it already
 * checked, and a write could land in memory another leaf reads mid-op
 * (found by an adversarial test: ATTENTION caches over the positions, and a
 * GET_ROWS out leaf over its ids, reached outside the session's buffer).
 * The same leaf index may be written and read by different nodes: nodes run
 * in order. O(written leaves x leaves). Returns 0 or BATON_E_GRAPH. */
static int check_written_leaves(const struct baton_graph *g)
{
    uint8_t *written = calloc(g->n_leaves ? g->n_leaves : 1, 1);
    uint32_t i, j;
    int rc = 0;

    if (written == NULL)
        return BATON_E_NOMEM;
    for (i = 0; i < g->n_nodes; i++) {
        const struct baton_graph_node *n = &g->nodes[i];

        if (n->out_leaf != BATON_SRC_NONE && n->out_leaf < g->n_leaves)
            written[n->out_leaf] = 1;
        if (n->op == BATON_OP_ATTENTION) {
            if (n->src[3] < g->n_leaves)
                written[n->src[3]] = 1;
            if (n->src[4] < g->n_leaves)
                written[n->src[4]] = 1;
        }
    }
    for (i = 0; i < g->n_leaves && rc == 0; i++) {
        if (!written[i])
            continue;
        for (j = 0; j < g->n_leaves; j++) {
            if (j != i && leaves_overlap(&g->leaves[i], &g->leaves[j])) {
                rc = BATON_E_GRAPH;
                break;
            }
        }
    }
    free(written);
    return rc;
}

/* See compute.h. */
uint64_t baton_graph_stored_bytes(const struct baton_graph *g)
{
    return (uint64_t)g->n_leaves * sizeof(struct baton_tensor_desc) +
           (uint64_t)g->n_nodes *
               (sizeof(struct baton_graph_node) + sizeof(struct baton_node_plan));
}

int baton_graph_validate(const struct baton_graph *g, uint32_t max_nodes,
                         struct baton_node_plan *plan, uint64_t *scratch_bytes)
{
    struct node_tmp *tmp = NULL;
    struct live_block *live = NULL;
    uint32_t i;
    int rc = 0;

    if (!g || !scratch_bytes || (g->n_nodes > 0 && (!plan || !g->nodes)) ||
        (g->n_leaves > 0 && !g->leaves))
        return BATON_E_INVAL;
    *scratch_bytes = 0;
    if (g->n_nodes > max_nodes || g->n_nodes > BATON_MAX_GRAPH_NODES ||
        g->n_leaves > BATON_MAX_GRAPH_LEAVES)
        return BATON_E_LIMIT;
    if (g->n_nodes == 0)
        return 0;

    tmp = calloc(g->n_nodes, sizeof(*tmp));
    live = calloc(g->n_nodes, sizeof(*live));
    if (!tmp || !live) {
        rc = BATON_E_NOMEM;
        goto out;
    }
    for (i = 0; i < g->n_nodes; i++) {
        rc = validate_node(g, i, plan, tmp);
        if (rc)
            goto out;
    }
    rc = check_written_leaves(g);
    if (rc)
        goto out;
    rc = layout(g, plan, tmp, live, scratch_bytes);
out:
    free(live);
    free(tmp);
    return rc;
}

/* ---- execution ---- */

struct exec_ctx {
    const struct baton_graph *g;
    uint8_t *const *leaf_data;
    const struct baton_node_plan *plan;
    uint8_t *scratch;
};

/* Scratch memory at byte offset off; NULL when the graph has no scratch
 * arena (every node then has an empty result or an out leaf, and no work
 * area: checked before any node runs), so no offset is ever applied to a
 * null pointer. */
static uint8_t *scratch_at(const struct exec_ctx *x, uint64_t off)
{
    return x->scratch ? x->scratch + off : NULL;
}

static void *tensor_data(const struct exec_ctx *x, uint32_t idx)
{
    const struct baton_graph_node *n;
    uint32_t j;

    idx = resolve(x->g, x->plan, idx);
    if (idx < x->g->n_leaves)
        return x->leaf_data[idx];
    j = idx - x->g->n_leaves;
    n = &x->g->nodes[j];
    if (n->out_leaf != BATON_SRC_NONE)
        return x->leaf_data[n->out_leaf];
    return scratch_at(x, x->plan[j].scratch_offset);
}

static const uint64_t *tensor_ne(const struct baton_graph *g, uint32_t idx)
{
    return idx < g->n_leaves ? g->leaves[idx].ne : g->nodes[idx - g->n_leaves].ne;
}

/* Leaf memory must be present and aligned for its 4-byte elements: checked
 * for every leaf a node reads or writes, before any node runs. */
static int check_leaf_ptr(const struct baton_graph *g, uint8_t *const *leaf_data, uint32_t idx)
{
    const uint8_t *p;

    if (idx >= g->n_leaves || g->leaves[idx].nbytes == 0)
        return 0;
    p = leaf_data[idx];
    if (!p || (uintptr_t)p % sizeof(float) != 0)
        return BATON_E_INVAL;
    return 0;
}

/* A node's work area in scratch: after its result when the result lives in
 * scratch too (see layout). */
static void *node_work(const struct exec_ctx *x, uint32_t i)
{
    uint64_t work_off = x->plan[i].scratch_offset;

    if (x->g->nodes[i].out_leaf == BATON_SRC_NONE) /* validated: cannot wrap */
        work_off += (x->plan[i].nbytes + (SCRATCH_ALIGN - 1)) & ~(uint64_t)(SCRATCH_ALIGN - 1);
    return scratch_at(x, work_off);
}

static uint32_t tensor_type(const struct baton_graph *g, uint32_t idx)
{
    return idx < g->n_leaves ? g->leaves[idx].type : g->nodes[idx - g->n_leaves].type;
}

/* A byte range of tensor memory, for the grouping check below. */
struct span {
    const uint8_t *p;
    uint64_t n;
};

static int spans_overlap(struct span a, struct span b)
{
    return a.n > 0 && b.n > 0 && (uintptr_t)a.p < (uintptr_t)b.p + b.n &&
           (uintptr_t)b.p < (uintptr_t)a.p + a.n;
}

/* 1 if no result span (out) overlaps the input, a weight or another
 * result span. */
static int group_disjoint(const struct span *out, uint32_t n_out, const struct span *w,
                          uint32_t n_w, struct span in)
{
    uint32_t a, b;

    for (a = 0; a < n_out; a++) {
        if (spans_overlap(out[a], in))
            return 0;
        for (b = 0; b < n_w; b++)
            if (spans_overlap(out[a], w[b]))
                return 0;
        for (b = a + 1; b < n_out; b++)
            if (spans_overlap(out[a], out[b]))
                return 0;
    }
    return 1;
}

/* How many nodes from i on run as one group of products over one input
 * (baton_cpu_mul_mat_group): node i and the MUL_MAT nodes right after it
 * with the same input x (src[1]), the same weight type, K and column
 * count, and results in scratch, at most BATON_CPU_MM_MAX_PARTS. The group
 * computes the same bits as the nodes one by one only if no node writes
 * what another reads, so it also stops at the first node whose result or
 * work area would overlap x, a weight or another result of the group
 * (first-fit layout keeps them apart in the graphs the model builds; this
 * makes it a checked fact). Returns the group's length with its products
 * in parts[0..length), or 1 (no group: run node i alone). */
static uint32_t mul_mat_group_len(const struct exec_ctx *x, uint32_t i,
                                  struct baton_cpu_mm_part *parts)
{
    const struct baton_graph *g = x->g;
    const struct baton_graph_node *n = &g->nodes[i];
    struct span w[BATON_CPU_MM_MAX_PARTS], out[BATON_CPU_MM_MAX_PARTS + 1], in;
    uint64_t k, m, work_bytes;
    uint32_t wtype, len;

    if (n->op != BATON_OP_MUL_MAT || n->out_leaf != BATON_SRC_NONE)
        return 1;
    wtype = tensor_type(g, n->src[0]);
    k = tensor_ne(g, n->src[0])[0];
    m = n->ne[1] * n->ne[2] * n->ne[3];
    work_bytes = baton_cpu_mul_mat_work_bytes(wtype, k, m);
    in.p = tensor_data(x, n->src[1]);
    in.n = k * m * sizeof(float); /* x's validated size */
    out[0].p = work_bytes ? node_work(x, i) : NULL; /* the group's one work area */
    out[0].n = work_bytes;
    for (len = 0; i + len < g->n_nodes && len < BATON_CPU_MM_MAX_PARTS; len++) {
        const uint32_t j = i + len;
        const struct baton_graph_node *nj = &g->nodes[j];

        if (nj->op != BATON_OP_MUL_MAT || nj->out_leaf != BATON_SRC_NONE ||
            nj->src[1] != n->src[1] || tensor_type(g, nj->src[0]) != wtype ||
            tensor_ne(g, nj->src[0])[0] != k || nj->ne[1] * nj->ne[2] * nj->ne[3] != m)
            break;
        parts[len].w = tensor_data(x, nj->src[0]);
        parts[len].y = (float *)scratch_at(x, x->plan[j].scratch_offset);
        parts[len].n = nj->ne[0];
        parts[len].ldy = nj->ne[0];
        w[len].p = parts[len].w;
        /* the weight's validated size */
        w[len].n = baton_cpu_weight_row_bytes(wtype, k) * nj->ne[0];
        out[len + 1].p = (const uint8_t *)parts[len].y;
        out[len + 1].n = x->plan[j].nbytes;
        if (!group_disjoint(out, len + 2, w, len + 1, in))
            break;
    }
    return len > 1 ? len : 1;
}

static int exec_node(const struct exec_ctx *x, uint32_t i, struct baton_pool *pool)
{
    const struct baton_graph *g = x->g;
    const struct baton_graph_node *n = &g->nodes[i];
    const uint32_t *src = n->src;
    const uint64_t *ne0 = n->op == BATON_OP_RESHAPE ? NULL : tensor_ne(g, src[0]);
    uint8_t *dst;
    uint64_t count;

    if (n->op == BATON_OP_RESHAPE)
        return 0; /* a view: no data moves */
    dst = n->out_leaf != BATON_SRC_NONE ? x->leaf_data[n->out_leaf]
                                        : scratch_at(x, x->plan[i].scratch_offset);
    count = x->plan[i].nbytes / sizeof(float);

    switch (n->op) {
    case BATON_OP_GET_ROWS:
        return baton_cpu_get_rows_typed(tensor_type(g, src[0]), tensor_data(x, src[0]), ne0[0],
                                        ne0[1], tensor_data(x, src[1]), tensor_ne(g, src[1])[0],
                                        (float *)dst);
    case BATON_OP_RMS_NORM:
        baton_cpu_rms_norm(pool, tensor_data(x, src[0]), (float *)dst, ne0[0],
                           ne0[0] ? count / ne0[0] : 0, param_f32(n->params[0]));
        return 0;
    case BATON_OP_MUL_MAT: {
        const uint32_t wtype = tensor_type(g, src[0]);
        const uint64_t m = n->ne[1] * n->ne[2] * n->ne[3];

        baton_cpu_mul_mat_typed(pool, wtype, tensor_data(x, src[0]), tensor_data(x, src[1]),
                                (float *)dst, ne0[0], ne0[1], m,
                                baton_cpu_mul_mat_work_bytes(wtype, ne0[0], m) ? node_work(x, i)
                                                                                : NULL);
        return 0;
    }
    case BATON_OP_ADD:
    case BATON_OP_MUL:
        baton_cpu_binary(pool, n->op == BATON_OP_MUL, tensor_data(x, src[0]), ne0,
                         tensor_data(x, src[1]), tensor_ne(g, src[1]), (float *)dst);
        return 0;
    case BATON_OP_SCALE:
        baton_cpu_scale(pool, tensor_data(x, src[0]), (float *)dst, count,
                        param_f32(n->params[0]));
        return 0;
    case BATON_OP_SILU:
        baton_cpu_silu(pool, tensor_data(x, src[0]), (float *)dst, count);
        return 0;
    case BATON_OP_GELU:
        baton_cpu_gelu(pool, tensor_data(x, src[0]), (float *)dst, count);
        return 0;
    case BATON_OP_ROPE:
    case BATON_OP_ROPE_FREQS:
        return baton_cpu_rope(pool, tensor_data(x, src[0]), tensor_data(x, src[1]),
                              n->op == BATON_OP_ROPE_FREQS ? tensor_data(x, src[2]) : NULL,
                              (float *)dst, ne0[0], ne0[1], ne0[2], n->params[0],
                              param_f32(n->params[1]), n->params[2],
                              n->params[3] != 0 ? param_f32(n->params[3]) : 1.0f);
    case BATON_OP_ATTENTION: {
        struct baton_cpu_attention a;

        a.q = tensor_data(x, src[0]);
        a.k = tensor_data(x, src[1]);
        a.v = tensor_data(x, src[2]);
        a.k_cache = tensor_data(x, src[3]);
        a.v_cache = tensor_data(x, src[4]);
        a.pos = tensor_data(x, src[5]);
        a.first = NULL;
        if (tensor_ne(g, src[5])[1] == 3) {
            /* rows: positions (ROPE's), cells written, first cells read */
            a.first = a.pos + 2 * ne0[2];
            a.pos += ne0[2];
        }
        a.out = (float *)dst;
        a.work = node_work(x, i);
        a.hd = ne0[0];
        a.nh = ne0[1];
        a.nt = ne0[2];
        a.nkv = tensor_ne(g, src[1])[1];
        a.n_ctx = tensor_ne(g, src[3])[1];
        a.scale = param_f32(n->params[0]);
        a.divide = n->params[1] == 1;
        a.window = n->params[2];
        a.cache_f16 = tensor_type(g, src[3]) == BATON_TYPE_F16;
        return baton_cpu_attention(pool, &a);
    }
    case BATON_OP_ARGMAX:
        baton_cpu_argmax(pool, tensor_data(x, src[0]), ne0[0], ne0[1], (int32_t *)dst);
        return 0;
    case BATON_OP_SAMPLE:
        return baton_cpu_sample(pool, tensor_data(x, src[0]), ne0[0], ne0[1],
                                tensor_data(x, src[1]), (int32_t *)dst, node_work(x, i));
    default:
        return BATON_E_GRAPH; /* not reached on a validated graph */
    }
}

/* MUL_MAT node i, or the group of len products over one input that
 * mul_mat_group_len put in parts (len > 1), in pieces of rows of W (the
 * group's rows laid end to end), each at most about BATON_GRAPH_TURN_FLOPS
 * per pool thread and a multiple of 16 rows per thread (the pool's row
 * units: the threads finish together), with turns->between between them:
 * the input is quantized once (baton_cpu_mul_mat_prepare) and each piece
 * writes its rows of its products' y in place (column stride: all the
 * rows). Rows of a product do
 * not depend on which rows are computed with them (the determinism rule), so
 * the bits equal one whole call. No memory is taken here: a transient buffer
 * per piece cost a fresh mapping (page faults and an munmap) per piece under
 * batond's malloc settings (src/server/sandbox.c fixes the mmap threshold),
 * about a third of a prefill's time on one core. Returns 0 or BATON_E_IO
 * (turns->between asked to stop). */
static int mul_mat_in_turns(const struct exec_ctx *x, uint32_t i,
                            struct baton_cpu_mm_part *parts, uint32_t len,
                            struct baton_pool *pool, const struct baton_exec_turns *turns)
{
    const struct baton_graph *g = x->g;
    const struct baton_graph_node *n = &g->nodes[i];
    const uint32_t wtype = tensor_type(g, n->src[0]);
    const uint64_t k = tensor_ne(g, n->src[0])[0];
    const uint64_t m = n->ne[1] * n->ne[2] * n->ne[3];
    const uint64_t per_row = 2 * k * m; /* validated shapes: no wrap below the budget */
    const uint64_t row_bytes = baton_cpu_weight_row_bytes(wtype, k);
    const float *in = tensor_data(x, n->src[1]);
    void *work = baton_cpu_mul_mat_work_bytes(wtype, k, m) ? node_work(x, i) : NULL;
    const uint64_t threads = baton_pool_threads(pool), unit = 16 * threads;
    uint64_t piece = per_row ? BATON_GRAPH_TURN_FLOPS * threads / per_row : UINT64_MAX, total = 0;
    uint32_t p;

    if (len <= 1) { /* node i alone: its result may be an out leaf */
        len = 1;
        parts[0].w = tensor_data(x, n->src[0]);
        parts[0].y = (float *)(n->out_leaf != BATON_SRC_NONE
                                   ? x->leaf_data[n->out_leaf]
                                   : scratch_at(x, x->plan[i].scratch_offset));
        parts[0].n = tensor_ne(g, n->src[0])[1];
        parts[0].ldy = parts[0].n;
    }
    /* pool runs of a few rows cost more than they give back */
    piece = piece < unit ? unit : piece / unit * unit;
    for (p = 0; p < len; p++)
        total += parts[p].n; /* validated sizes: no wrap */
    baton_cpu_mul_mat_prepare(pool, wtype, in, k, m, work);
    /* pieces of the products' rows laid end to end: a piece that spans two
     * products runs as a group of their two row ranges */
    for (uint64_t g0 = 0; g0 < total; g0 += piece) {
        const uint64_t g1 = total - g0 < piece ? total : g0 + piece;
        struct baton_cpu_mm_part sub[BATON_CPU_MM_MAX_PARTS];
        uint64_t lo = 0;
        uint32_t n_sub = 0;

        for (p = 0; p < len; lo += parts[p].n, p++) {
            const uint64_t a = g0 > lo ? g0 : lo;
            const uint64_t b = g1 < lo + parts[p].n ? g1 : lo + parts[p].n;

            if (a >= b)
                continue;
            sub[n_sub].w = (const uint8_t *)parts[p].w + (a - lo) * row_bytes;
            sub[n_sub].y = parts[p].y + (a - lo);
            sub[n_sub].n = b - a;
            sub[n_sub].ldy = parts[p].ldy;
            n_sub++;
        }
        if (g0 > 0 && turns->between(turns->arg) != 0)
            return BATON_E_IO;
        baton_cpu_mul_mat_group_prepared(pool, wtype, sub, n_sub, in, k, m, work);
    }
    return 0;
}

/* Nodes i..i+len-1 (one MUL_MAT, or a group of them) cost more than one
 * turn's worth on pool: they run in pieces. */
static int wants_pieces(const struct exec_ctx *x, uint32_t i, uint32_t len,
                        const struct baton_pool *pool)
{
    const struct baton_graph *g = x->g;
    uint64_t total = 0;

    for (uint32_t j = i; j < i + len; j++) {
        const struct baton_graph_node *n = &g->nodes[j];
        if (n->op != BATON_OP_MUL_MAT)
            return 0;
        const uint64_t k = tensor_ne(g, n->src[0])[0], rows = tensor_ne(g, n->src[0])[1];
        const uint64_t m = n->ne[1] * n->ne[2] * n->ne[3];
        uint64_t f;
        if (__builtin_mul_overflow(2 * k, rows, &f) || __builtin_mul_overflow(f, m, &f) ||
            __builtin_add_overflow(total, f, &total))
            return 1;
    }
    return total > BATON_GRAPH_TURN_FLOPS * baton_pool_threads(pool);
}

int baton_graph_execute(const struct baton_graph *g, uint8_t *const *leaf_data,
                        const struct baton_node_plan *plan, uint8_t *scratch,
                        struct baton_pool *pool)
{
    return baton_graph_execute_turns(g, leaf_data, plan, scratch, pool, NULL);
}

int baton_graph_execute_turns(const struct baton_graph *g, uint8_t *const *leaf_data,
                              const struct baton_node_plan *plan, uint8_t *scratch,
                              struct baton_pool *pool, const struct baton_exec_turns *turns)
{
    struct exec_ctx x = {g, leaf_data, plan, scratch};
    uint32_t i, s, len;
    int rc;

    if (!g || (g->n_nodes > 0 && !plan) || (g->n_leaves > 0 && !leaf_data))
        return BATON_E_INVAL;
    if (scratch && (uintptr_t)scratch % sizeof(float) != 0)
        return BATON_E_INVAL;
    for (i = 0; i < g->n_nodes; i++) {
        const struct baton_graph_node *n = &g->nodes[i];
        const uint32_t arity = baton_op_arity(n->op);

        for (s = 0; s < arity; s++) {
            rc = check_leaf_ptr(g, leaf_data, n->src[s]);
            if (rc)
                return rc;
        }
        if (n->out_leaf != BATON_SRC_NONE) {
            rc = check_leaf_ptr(g, leaf_data, n->out_leaf);
            if (rc)
                return rc;
        } else if (n->op != BATON_OP_RESHAPE && plan[i].nbytes > 0 && !scratch) {
            return BATON_E_INVAL;
        }
        if (n->op == BATON_OP_ATTENTION && !scratch) {
            const uint64_t *q = tensor_ne(g, n->src[0]);

            if (q[0] > 0 && q[1] > 0 && q[2] > 0 && tensor_ne(g, n->src[3])[1] > 0)
                return BATON_E_INVAL; /* score rows are needed */
        }
        if (n->op == BATON_OP_MUL_MAT && !scratch &&
            baton_cpu_mul_mat_work_bytes(tensor_type(g, n->src[0]), tensor_ne(g, n->src[0])[0],
                                         n->ne[1] * n->ne[2] * n->ne[3]) > 0)
            return BATON_E_INVAL; /* quantized activations are needed */
    }
    for (i = 0; i < g->n_nodes; i += len) {
        struct baton_cpu_mm_part parts[BATON_CPU_MM_MAX_PARTS];

        if (turns && i > 0 && turns->between(turns->arg) != 0)
            return BATON_E_IO;
        len = mul_mat_group_len(&x, i, parts);
        if (turns && wants_pieces(&x, i, len, pool)) {
            /* a large product or group: in pieces, its input quantized once */
            rc = mul_mat_in_turns(&x, i, parts, len, pool, turns);
            if (rc)
                return rc;
            continue;
        }
        if (len > 1) {
            const struct baton_graph_node *n = &g->nodes[i];
            const uint32_t wtype = tensor_type(g, n->src[0]);
            const uint64_t k = tensor_ne(g, n->src[0])[0], m = n->ne[1] * n->ne[2] * n->ne[3];

            baton_cpu_mul_mat_group(pool, wtype, parts, len, tensor_data(&x, n->src[1]), k, m,
                                    baton_cpu_mul_mat_work_bytes(wtype, k, m) ? node_work(&x, i)
                                                                              : NULL);
            continue;
        }
        rc = exec_node(&x, i, pool);
        if (rc)
            return rc;
    }
    return 0;
}

/* ---- cost ---- */

static uint64_t sat_mul(uint64_t a, uint64_t b)
{
    uint64_t r;

    return __builtin_mul_overflow(a, b, &r) ? UINT64_MAX : r;
}

static uint64_t sat_numel(const uint64_t ne[BATON_MAX_DIMS])
{
    return sat_mul(sat_mul(ne[0], ne[1]), sat_mul(ne[2], ne[3]));
}

/* Rough count: MUL_MAT max(2*K*N*M, N*M), ATTENTION 4*hd*nh*nt*n_ctx, SAMPLE 32 per
 * logit, ARGMAX the source's elements, RESHAPE 0, every other op its result's
 * elements.
 * Saturates at UINT64_MAX; sources that are not valid indices count 0. */
uint64_t baton_graph_flops(const struct baton_graph *g)
{
    uint64_t total = 0;
    uint32_t i;

    if (!g || !g->nodes)
        return 0;
    for (i = 0; i < g->n_nodes; i++) {
        const struct baton_graph_node *n = &g->nodes[i];
        const uint32_t arity = baton_op_arity(n->op);
        uint64_t f = 0;
        int src0_ok;

        if (arity == 0)
            continue;
        src0_ok = n->src[0] < g->n_leaves ? g->leaves != NULL : n->src[0] - g->n_leaves < i;
        switch (n->op) {
        case BATON_OP_MUL_MAT:
            /* at least one per output element: K = 0 still writes N*M zeros */
            if (src0_ok)
                f = sat_mul(sat_mul(2, tensor_ne(g, n->src[0])[0]), sat_numel(n->ne));
            if (f < sat_numel(n->ne))
                f = sat_numel(n->ne);
            break;
        case BATON_OP_ATTENTION: {
            /* at least the cache writes (k and v, even with nh = 0) and one
             * per output element */
            const int k_ok = n->src[1] < g->n_leaves ? g->leaves != NULL
                                                     : n->src[1] - g->n_leaves < i;

            if (n->src[3] < g->n_leaves && g->leaves)
                f = sat_mul(sat_mul(4, sat_numel(n->ne)), g->leaves[n->src[3]].ne[1]);
            if (k_ok && f < sat_mul(2, sat_numel(tensor_ne(g, n->src[1]))))
                f = sat_mul(2, sat_numel(tensor_ne(g, n->src[1])));
            if (f < sat_numel(n->ne))
                f = sat_numel(n->ne);
            break;
        }
        case BATON_OP_ARGMAX:
            if (src0_ok)
                f = sat_numel(tensor_ne(g, n->src[0]));
            break;
        case BATON_OP_SAMPLE:
            /* an exp and a sort of every row: 32 per logit */
            if (src0_ok)
                f = sat_mul(32, sat_numel(tensor_ne(g, n->src[0])));
            break;
        case BATON_OP_RESHAPE:
            break;
        default:
            f = sat_numel(n->ne);
            break;
        }
        total = f > UINT64_MAX - total ? UINT64_MAX : total + f;
    }
    return total;
}
