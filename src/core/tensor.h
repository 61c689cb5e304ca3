/* A tensor as the protocol names it, and a decoded graph.
 *
 * A tensor in a buffer is (buffer handle, byte offset, type, ne[4], nb[4]).
 * nbytes is the byte extent computed (with checked arithmetic) by the wire
 * decoder: for a contiguous tensor, nb[0] = block_bytes (per block of
 * block_elems elements along ne[0]), nb[1] = nb[0] * ne[0] / block_elems,
 * nb[i] = nb[i-1] * ne[i-1] for i >= 2, and nbytes = nb[3] * ne[3].
 * A dimension of 0 makes nbytes 0. Only contiguous tensors are accepted.
 *
 * Graph intermediates (nodes) carry no handle and no offset; their memory
 * comes from the session's scratch arena.
 */
#ifndef BATON_CORE_TENSOR_H
#define BATON_CORE_TENSOR_H

#include <stdint.h>

#include "core/ops.h"
#include "core/types.h"

struct baton_tensor_desc {
    uint64_t buffer; /* opaque handle: generation << 32 | index */
    uint64_t offset; /* bytes from the start of the buffer */
    uint32_t type;   /* enum baton_type */
    uint64_t ne[BATON_MAX_DIMS];
    uint64_t nb[BATON_MAX_DIMS];
    uint64_t nbytes; /* computed extent; offset + nbytes <= buffer size once resolved */
};

/* A graph node as decoded from GRAPH_COMPUTE. src[i] indexes a single space:
 * 0..n_leaves-1 are leaves, n_leaves + j is node j; the decoder guarantees
 * src[i] < n_leaves + (this node's index) for i < arity, and BATON_SRC_NONE
 * for the unused slots, so cycles cannot be expressed. */
struct baton_graph_node {
    uint32_t op;
    uint32_t type;                 /* result type as declared by the client */
    uint64_t ne[BATON_MAX_DIMS];   /* result shape as declared by the client */
    uint32_t src[BATON_MAX_SRC];
    uint32_t out_leaf;             /* leaf that receives the result, or BATON_SRC_NONE */
    uint32_t params[BATON_N_PARAMS];
};

/* A decoded graph. Arrays are owned by whoever filled them (the server's
 * per-session decode arena, or a test). */
struct baton_graph {
    uint32_t n_leaves;
    uint32_t n_nodes;
    struct baton_tensor_desc *leaves;
    struct baton_graph_node *nodes;
};

#endif
