/* Coordinator-side graph builder (see graph_builder.h). */
#include "model/graph_builder.h"

#include <string.h>

#include "baton/status.h"

void baton_gb_init(struct baton_gb *gb, struct baton_tensor_desc *leaves, uint32_t cap_leaves,
                   struct baton_graph_node *nodes, uint32_t cap_nodes)
{
    memset(gb, 0, sizeof(*gb));
    gb->g.leaves = leaves;
    gb->g.nodes = nodes;
    gb->cap_leaves = cap_leaves;
    gb->cap_nodes = cap_nodes;
}

uint32_t baton_gb_leaf(struct baton_gb *gb, const struct baton_tensor_desc *t)
{
    if (gb->error)
        return BATON_SRC_NONE;
    if (gb->g.n_leaves == gb->cap_leaves) {
        gb->error = BATON_E_LIMIT;
        return BATON_SRC_NONE;
    }
    gb->g.leaves[gb->g.n_leaves] = *t;
    return gb->g.n_leaves++;
}

uint32_t baton_gb_node(struct baton_gb *gb, uint32_t op, uint32_t type, const uint64_t ne[4],
                       const uint32_t src[BATON_MAX_SRC], const uint32_t params[BATON_N_PARAMS])
{
    struct baton_graph_node *n;
    int i;

    if (gb->error)
        return BATON_SRC_NONE;
    if (gb->g.n_nodes == gb->cap_nodes) {
        gb->error = BATON_E_LIMIT;
        return BATON_SRC_NONE;
    }
    for (i = 0; i < BATON_MAX_SRC; i++) {
        if (src[i] == BATON_SRC_NONE && i < (int)baton_op_arity(op)) {
            gb->error = BATON_E_GRAPH; /* a source of an earlier failed add */
            return BATON_SRC_NONE;
        }
    }
    n = &gb->g.nodes[gb->g.n_nodes];
    memset(n, 0, sizeof(*n));
    n->op = op;
    n->type = type;
    for (i = 0; i < 4; i++)
        n->ne[i] = ne[i];
    for (i = 0; i < BATON_MAX_SRC; i++)
        n->src[i] = src[i];
    n->out_leaf = BATON_SRC_NONE;
    if (params)
        for (i = 0; i < BATON_N_PARAMS; i++)
            n->params[i] = params[i];
    return BATON_GB_NODE | gb->g.n_nodes++;
}

void baton_gb_set_out(struct baton_gb *gb, uint32_t node_ref, uint32_t leaf_ref)
{
    if (gb->error)
        return;
    if (!(node_ref & BATON_GB_NODE) || (node_ref & ~BATON_GB_NODE) >= gb->g.n_nodes ||
        leaf_ref >= gb->g.n_leaves) {
        gb->error = BATON_E_GRAPH;
        return;
    }
    gb->g.nodes[node_ref & ~BATON_GB_NODE].out_leaf = leaf_ref;
}

uint32_t baton_gb_type(const struct baton_gb *gb, uint32_t ref)
{
    if (ref & BATON_GB_NODE)
        return gb->g.nodes[ref & ~BATON_GB_NODE].type;
    return gb->g.leaves[ref].type;
}

const uint64_t *baton_gb_ne(const struct baton_gb *gb, uint32_t ref)
{
    if (ref & BATON_GB_NODE)
        return gb->g.nodes[ref & ~BATON_GB_NODE].ne;
    return gb->g.leaves[ref].ne;
}

int baton_gb_finish(struct baton_gb *gb)
{
    uint32_t j;
    int i;

    if (gb->error)
        return gb->error;
    for (j = 0; j < gb->g.n_nodes; j++) {
        struct baton_graph_node *n = &gb->g.nodes[j];

        for (i = 0; i < BATON_MAX_SRC; i++)
            if (n->src[i] != BATON_SRC_NONE && (n->src[i] & BATON_GB_NODE))
                n->src[i] = gb->g.n_leaves + (n->src[i] & ~BATON_GB_NODE);
    }
    return 0;
}

uint32_t baton_gb_f32(float v)
{
    uint32_t u;

    memcpy(&u, &v, sizeof(u));
    return u;
}
