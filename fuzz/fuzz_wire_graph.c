/* Fuzz target wire_graph: a GRAPH_COMPUTE payload decoded as the server
 * decodes it (graph header, every leaf descriptor, every node), then
 * baton_graph_validate (src/compute) on the result and, when validation
 * passes and the graph is small, baton_graph_execute on synthetic leaf
 * memory.
 *
 * Input: the payload (docs/PROTOCOL.md, "GRAPH_COMPUTE"), optionally
 * followed by extra bytes: when the input is longer than the
 * 8 + 88*n_leaves + 104*n_nodes bytes its header announces, the decoders see
 * exactly that prefix and the rest fills the leaves' data (repeated), so
 * index-reading ops (GET_ROWS, ROPE, ATTENTION) meet fuzzed indices.
 *
 * Each leaf gets its own heap block of exactly nbytes, placed at the
 * leaf's offset modulo 64 from a 64-byte boundary (as a buffer mapped by
 * the server would place it), and the scratch arena is exactly
 * scratch_bytes: ASan reports any access outside them.
 *
 * Properties: decoded nodes obey the source/out-leaf rules of wire.h;
 * a validated plan keeps every scratch result inside the arena, 64-byte
 * aligned, and every RESHAPE aliases an earlier non-RESHAPE tensor;
 * execution returns 0, BATON_E_INDEX or BATON_E_INVAL (misaligned leaf).
 */
#include "fuzz_common.h"

#include "baton/status.h"
#include "compute/compute.h"
#include "core/ops.h"
#include "wire/wire.h"

#define MAX_NODES 8192u                /* the server's default node limit */
#define EXEC_MAX_BYTES (1u << 20)      /* leaves and scratch, each */
#define EXEC_MAX_FLOPS (1ull << 25)    /* keeps one execution well under a second */

static struct baton_pool *pool;

static void fill(uint8_t *dst, uint64_t n, const uint8_t *src, size_t src_len, uint64_t *cursor)
{
    if (src_len == 0) {
        memset(dst, 0, (size_t)n);
        return;
    }
    for (uint64_t i = 0; i < n; i++)
        dst[i] = src[(*cursor)++ % src_len];
}

static void check_plan(const struct baton_graph *g, const struct baton_node_plan *plan,
                       uint64_t scratch_bytes)
{
    for (uint32_t j = 0; j < g->n_nodes; j++) {
        const struct baton_graph_node *n = &g->nodes[j];
        if (n->op == BATON_OP_RESHAPE) {
            uint64_t a = plan[j].scratch_offset;
            FUZZ_CHECK(a < (uint64_t)g->n_leaves + j, "RESHAPE %u aliases a later index", j);
            if (a >= g->n_leaves)
                FUZZ_CHECK(g->nodes[a - g->n_leaves].op != BATON_OP_RESHAPE,
                           "RESHAPE %u aliases a RESHAPE", j);
            FUZZ_CHECK(n->out_leaf == BATON_SRC_NONE, "RESHAPE with an out leaf");
            continue;
        }
        if (n->out_leaf != BATON_SRC_NONE) {
            FUZZ_CHECK(n->out_leaf < g->n_leaves, "out leaf index");
            FUZZ_CHECK(plan[j].nbytes == g->leaves[n->out_leaf].nbytes,
                       "node %u result bytes differ from its out leaf", j);
            continue;
        }
        FUZZ_CHECK(plan[j].scratch_offset % 64 == 0, "node %u scratch misaligned", j);
        FUZZ_CHECK(plan[j].scratch_offset <= scratch_bytes &&
                       plan[j].nbytes <= scratch_bytes - plan[j].scratch_offset,
                   "node %u result outside the arena", j);
    }
}

static void execute(const struct baton_graph *g, const struct baton_node_plan *plan,
                    uint64_t scratch_bytes, const uint8_t *extra, size_t extra_len)
{
    uint64_t total = 0, cursor = 0;
    for (uint32_t i = 0; i < g->n_leaves; i++) {
        total += g->leaves[i].nbytes; /* each <= EXEC_MAX_BYTES once checked */
        if (g->leaves[i].nbytes > EXEC_MAX_BYTES || total > EXEC_MAX_BYTES)
            return;
    }
    if (scratch_bytes > EXEC_MAX_BYTES || baton_graph_flops(g) > EXEC_MAX_FLOPS)
        return;
    if (!pool && baton_pool_create(1, &pool) != 0)
        abort();

    uint8_t **blocks = calloc(g->n_leaves + 1u, sizeof *blocks);
    uint8_t **leaf_data = calloc(g->n_leaves + 1u, sizeof *leaf_data);
    uint8_t *scratch = NULL;
    if (!blocks || !leaf_data)
        abort();
    for (uint32_t i = 0; i < g->n_leaves; i++) {
        uint64_t n = g->leaves[i].nbytes;
        size_t mis = (size_t)(g->leaves[i].offset % 64);
        if (n == 0)
            continue;
        if (posix_memalign((void **)&blocks[i], 64, mis + (size_t)n) != 0)
            abort();
        leaf_data[i] = blocks[i] + mis;
        fill(leaf_data[i], n, extra, extra_len, &cursor);
    }
    if (scratch_bytes > 0) {
        if (posix_memalign((void **)&scratch, 64, (size_t)scratch_bytes) != 0)
            abort();
        memset(scratch, 0, (size_t)scratch_bytes);
    }
    int rc = baton_graph_execute(g, leaf_data, plan, scratch, pool);
    FUZZ_CHECK(rc == 0 || rc == BATON_E_INDEX || rc == BATON_E_INVAL, "execute gave %d", rc);
    for (uint32_t i = 0; i < g->n_leaves; i++)
        free(blocks[i]);
    free(blocks);
    free(leaf_data);
    free(scratch);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    uint8_t *buf = fuzz_dup(data, size);
    struct baton_tensor_desc *leaves = NULL;
    struct baton_graph_node *nodes = NULL;
    struct baton_node_plan *plan = NULL;
    uint32_t n_leaves = 0, n_nodes = 0;
    size_t pos = 0, glen = size;
    int rc;

    if (size >= 8) {
        uint64_t need = 8 + 88 * fuzz_le(buf, 4) + 104 * fuzz_le(buf + 4, 4);
        if (need < size)
            glen = (size_t)need;
    }
    rc = baton_wire_decode_graph_header(buf, glen, &pos, MAX_NODES, &n_leaves, &n_nodes);
    if (rc != 0) {
        FUZZ_CHECK(pos == 0, "header cursor moved on failure");
        goto out;
    }
    FUZZ_CHECK(n_nodes >= 1 && n_nodes <= MAX_NODES && n_leaves <= BATON_MAX_GRAPH_LEAVES &&
                   glen - pos == (uint64_t)n_leaves * 88 + (uint64_t)n_nodes * 104,
               "graph header counts");
    leaves = calloc(n_leaves + 1u, sizeof *leaves);
    nodes = calloc(n_nodes, sizeof *nodes);
    plan = calloc(n_nodes, sizeof *plan);
    if (!leaves || !nodes || !plan)
        abort();
    for (uint32_t i = 0; i < n_leaves; i++)
        if (baton_wire_decode_tensor(buf, glen, &pos, &leaves[i]) != 0)
            goto out;
    for (uint32_t j = 0; j < n_nodes; j++) {
        const struct baton_graph_node *n = &nodes[j];
        if (baton_wire_decode_node(buf, glen, &pos, n_leaves, j, &nodes[j]) != 0)
            goto out;
        uint32_t arity = baton_op_arity(n->op);
        FUZZ_CHECK(arity >= 1 && arity <= BATON_MAX_SRC, "node %u op %u", j, n->op);
        for (uint32_t s = 0; s < BATON_MAX_SRC; s++)
            FUZZ_CHECK(s < arity ? n->src[s] < n_leaves + j : n->src[s] == BATON_SRC_NONE,
                       "node %u src[%u] = %u", j, s, n->src[s]);
        FUZZ_CHECK(n->out_leaf == BATON_SRC_NONE || n->out_leaf < n_leaves, "node %u out_leaf", j);
    }
    FUZZ_CHECK(pos == glen, "payload not consumed exactly");

    struct baton_graph g = {n_leaves, n_nodes, leaves, nodes};
    uint64_t scratch_bytes = 0;
    rc = baton_graph_validate(&g, MAX_NODES, plan, &scratch_bytes);
    if (rc != 0)
        goto out;
    check_plan(&g, plan, scratch_bytes);
    execute(&g, plan, scratch_bytes, buf + glen, size - glen);
out:
    free(leaves);
    free(nodes);
    free(plan);
    free(buf);
    return 0;
}
