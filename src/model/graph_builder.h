/* Builds a struct baton_graph on the coordinator side.
 *
 * Nodes are added before the number of leaves is known, so a reference to a
 * node is tagged (BATON_GB_NODE | j) while building; baton_gb_finish rewrites
 * it to the wire form n_leaves + j (docs/PROTOCOL.md, GRAPH_COMPUTE).
 */
#ifndef BATON_MODEL_GRAPH_BUILDER_H
#define BATON_MODEL_GRAPH_BUILDER_H

#include <stdint.h>

#include "core/tensor.h"

#define BATON_GB_NODE 0x80000000u

struct baton_gb {
    struct baton_graph g;     /* leaves/nodes point into the arrays below */
    uint32_t cap_leaves;
    uint32_t cap_nodes;
    int error;                /* first error (BATON_E_LIMIT when full); sticky */
};

/* Initialises a builder over caller-owned arrays (ownership stays with the
 * caller). */
void baton_gb_init(struct baton_gb *gb, struct baton_tensor_desc *leaves, uint32_t cap_leaves,
                   struct baton_graph_node *nodes, uint32_t cap_nodes);

/* Adds a leaf; returns its reference (its index), or BATON_SRC_NONE when
 * full (gb->error set). */
uint32_t baton_gb_leaf(struct baton_gb *gb, const struct baton_tensor_desc *t);

/* Adds a node with result type/shape and up to BATON_MAX_SRC sources
 * (references from baton_gb_leaf / baton_gb_node; unused = BATON_SRC_NONE).
 * params may be NULL (all zero). Returns the node's reference. */
uint32_t baton_gb_node(struct baton_gb *gb, uint32_t op, uint32_t type, const uint64_t ne[4],
                       const uint32_t src[BATON_MAX_SRC], const uint32_t params[BATON_N_PARAMS]);

/* Makes node `node_ref` write its result into leaf `leaf_ref`. */
void baton_gb_set_out(struct baton_gb *gb, uint32_t node_ref, uint32_t leaf_ref);

/* Result type and shape of a reference. */
uint32_t baton_gb_type(const struct baton_gb *gb, uint32_t ref);
const uint64_t *baton_gb_ne(const struct baton_gb *gb, uint32_t ref);

/* Rewrites node references to wire indices. Returns 0 or gb->error. The
 * builder must not be extended afterwards. */
int baton_gb_finish(struct baton_gb *gb);

/* Bit pattern of a float parameter. */
uint32_t baton_gb_f32(float v);

#endif
