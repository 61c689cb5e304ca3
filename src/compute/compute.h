/* Graph validation and execution on the CPU.
 *
 * The server decodes a GRAPH_COMPUTE message (src/wire) into a
 * struct baton_graph, resolves every leaf to memory it owns (checking
 * ownership and extents), then calls baton_graph_validate and, only if that
 * succeeds, baton_graph_execute. Nothing here reads the wire or a handle.
 *
 * Determinism: kernels give the same bits for any thread count and batch
 * size; threads split output rows and never split a reduction.
 */
#ifndef BATON_COMPUTE_H
#define BATON_COMPUTE_H

#include <stddef.h>
#include <stdint.h>

#include "core/tensor.h"

struct baton_pool; /* persistent worker pool */

/* Creates a pool of n_threads workers (n_threads >= 1; 1 means the caller's
 * thread only). Returns 0 or BATON_E_NOMEM / BATON_E_INVAL. Owned by the
 * caller; release with baton_pool_destroy. */
int baton_pool_create(uint32_t n_threads, struct baton_pool **out);
void baton_pool_destroy(struct baton_pool *pool);
uint32_t baton_pool_threads(const struct baton_pool *pool);

/* Per-node execution plan, filled by baton_graph_validate. */
struct baton_node_plan {
    uint64_t nbytes;         /* result bytes */
    uint64_t scratch_offset; /* where the result lives in the scratch arena
                                (unused when out_leaf is set or op is RESHAPE) */
};

/* Validates a decoded graph before anything runs: op known and enabled, each
 * source's type and shape as the op requires (src/core/ops.h), parameters in
 * range, declared result type/shape equal to what the op produces, out_leaf
 * type and shape equal to the node's (and not one of the node's sources),
 * KV-cache sources of ATTENTION are leaves, at most max_nodes nodes.
 * Leaves must already have passed the wire checks (nbytes computed).
 * plan has g->n_nodes entries (caller-owned). On success *scratch_bytes is
 * the arena size needed (results 64-byte aligned). Returns 0 or
 * BATON_E_GRAPH / BATON_E_SHAPE / BATON_E_TYPE / BATON_E_UNSUPPORTED /
 * BATON_E_LIMIT / BATON_E_OVERFLOW. */
int baton_graph_validate(const struct baton_graph *g, uint32_t max_nodes,
                         struct baton_node_plan *plan, uint64_t *scratch_bytes);

/* Executes a validated graph in node order. leaf_data[i] points at leaf i's
 * first byte (leaves[i].nbytes valid bytes, owned by the caller and pinned
 * for the call). scratch is at least scratch_bytes (64-byte aligned).
 * Returns 0 or BATON_E_INDEX when an index read from data (GET_ROWS ids,
 * ROPE/ATTENTION positions) is out of range; nodes before the failing one
 * may have written their out leaves. */
int baton_graph_execute(const struct baton_graph *g, uint8_t *const *leaf_data,
                        const struct baton_node_plan *plan, uint8_t *scratch,
                        struct baton_pool *pool);

/* Estimated floating-point operations of a validated graph (for the compute
 * budget of issue 3). */
uint64_t baton_graph_flops(const struct baton_graph *g);

#endif
