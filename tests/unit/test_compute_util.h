/* Small graph builder shared by the compute unit tests. Leaves first, then
 * nodes; indices returned are in the graph's single source space. */
#ifndef BATON_TEST_COMPUTE_UTIL_H
#define BATON_TEST_COMPUTE_UTIL_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "baton/status.h"
#include "compute/compute.h"
#include "core/types.h"

#define TG_MAX 32
#define NONE BATON_SRC_NONE

struct tg {
    struct baton_tensor_desc leaves[TG_MAX];
    struct baton_graph_node nodes[TG_MAX];
    uint8_t *data[TG_MAX];
    struct baton_node_plan plan[TG_MAX];
    struct baton_graph g;
    uint64_t scratch_bytes;
};

static inline void tg_init(struct tg *t)
{
    memset(t, 0, sizeof(*t));
    t->g.leaves = t->leaves;
    t->g.nodes = t->nodes;
}

/* A contiguous leaf over caller memory (F32/I32/F16/BF16; quantized types
 * get a block-wise extent). */
static inline uint32_t tg_leaf(struct tg *t, uint32_t type, uint64_t n0, uint64_t n1, uint64_t n2,
                               uint64_t n3, void *data)
{
    struct baton_tensor_desc *d = &t->leaves[t->g.n_leaves];
    uint32_t be = 1, bb = 4;

    /* the block of the type table (ggml's layouts); an unknown type gets
     * 4 bytes per element (tests of the type check) */
    if (baton_type_block(type, &be, &bb) != 0) {
        be = 1;
        bb = 4;
    }
    memset(d, 0, sizeof(*d));
    /* each leaf its own buffer, so no two leaves overlap (a test that wants
     * aliasing sets buffer/offset itself) */
    d->buffer = (uint64_t)t->g.n_leaves + 1;
    d->type = type;
    d->ne[0] = n0;
    d->ne[1] = n1;
    d->ne[2] = n2;
    d->ne[3] = n3;
    d->nb[0] = bb;
    d->nb[1] = bb * (n0 / be);
    d->nb[2] = d->nb[1] * n1;
    d->nb[3] = d->nb[2] * n2;
    d->nbytes = d->nb[3] * n3;
    t->data[t->g.n_leaves] = data;
    return t->g.n_leaves++;
}

/* A node with up to 6 sources (NONE-terminated list not needed: pass NONE
 * for the unused ones) and up to 3 parameters. */
static inline uint32_t tg_node(struct tg *t, uint32_t op, uint32_t type, uint64_t n0, uint64_t n1,
                               uint64_t n2, uint64_t n3, const uint32_t src[6],
                               const uint32_t params[3])
{
    struct baton_graph_node *n = &t->nodes[t->g.n_nodes];
    int i;

    memset(n, 0, sizeof(*n));
    n->op = op;
    n->type = type;
    n->ne[0] = n0;
    n->ne[1] = n1;
    n->ne[2] = n2;
    n->ne[3] = n3;
    for (i = 0; i < BATON_MAX_SRC; i++)
        n->src[i] = src ? src[i] : NONE;
    n->out_leaf = NONE;
    if (params)
        for (i = 0; i < 3; i++)
            n->params[i] = params[i];
    return t->g.n_leaves + t->g.n_nodes++;
}

static inline struct baton_graph_node *tg_at(struct tg *t, uint32_t idx)
{
    return &t->nodes[idx - t->g.n_leaves];
}

static inline int tg_validate(struct tg *t, uint32_t max_nodes)
{
    return baton_graph_validate(&t->g, max_nodes, t->plan, &t->scratch_bytes);
}

/* Validates and executes with a fresh 64-byte aligned arena filled with a
 * pattern (so reads of unwritten scratch show). */
/* tg_run with turns (compute.h; NULL: none). */
static inline int tg_run_turns(struct tg *t, struct baton_pool *pool,
                               const struct baton_exec_turns *turns)
{
    uint8_t *scratch = NULL;
    int rc = tg_validate(t, TG_MAX);

    if (rc)
        return rc;
    if (t->scratch_bytes > 0) {
        scratch = aligned_alloc(64, (size_t)t->scratch_bytes);
        if (!scratch)
            return BATON_E_NOMEM;
        memset(scratch, 0xA5, (size_t)t->scratch_bytes);
    }
    rc = baton_graph_execute_turns(&t->g, t->data, t->plan, scratch, pool, turns);
    free(scratch);
    return rc;
}

static inline int tg_run(struct tg *t, struct baton_pool *pool)
{
    return tg_run_turns(t, pool, NULL);
}

static inline uint32_t f32_bits(float f)
{
    uint32_t u;

    memcpy(&u, &f, sizeof(u));
    return u;
}

#define SRC1(a) ((const uint32_t[6]){(a), NONE, NONE, NONE, NONE, NONE})
#define SRC2(a, b) ((const uint32_t[6]){(a), (b), NONE, NONE, NONE, NONE})
#define SRC6(a, b, c, d, e, f) ((const uint32_t[6]){(a), (b), (c), (d), (e), (f)})
#define P1(a) ((const uint32_t[3]){(a), 0, 0})
#define P2(a, b) ((const uint32_t[3]){(a), (b), 0})
#define P3(a, b, c) ((const uint32_t[3]){(a), (b), (c)})

#endif
