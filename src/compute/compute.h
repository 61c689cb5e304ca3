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

/* Most threads a pool may have (the caller included). ATTENTION reserves one
 * score row per thread in the scratch arena, at most this many. */
#define BATON_POOL_MAX_THREADS 64u

/* Creates a pool of n_threads workers (1 <= n_threads <=
 * BATON_POOL_MAX_THREADS; 1 means the caller's thread only): n_threads - 1
 * persistent pthreads that sleep on a condition variable between jobs.
 * Returns 0 or BATON_E_NOMEM / BATON_E_INVAL. Owned by the caller; release
 * with baton_pool_destroy. A pool may be shared by several threads: their
 * parallel sections run one after another. */
int baton_pool_create(uint32_t n_threads, struct baton_pool **out);
void baton_pool_destroy(struct baton_pool *pool);

/* The instruction-set level the CPU kernels of this process use:
 * "scalar", "avx2" or "avx512" (static strings). The best the CPU and OS
 * support, lowered by the environment variable BATON_CPU_ISA (scalar,
 * avx2 or avx512, any case; read once, at the first call). *env_ignored
 * (if not NULL) is set to 1 when BATON_CPU_ISA is set to anything else, so
 * a program can say so, else 0. */
const char *baton_compute_kernels(int *env_ignored);
uint32_t baton_pool_threads(const struct baton_pool *pool);

/* Per-node execution plan, filled by baton_graph_validate. */
struct baton_node_plan {
    uint64_t nbytes;         /* result bytes */
    uint64_t scratch_offset; /* where the node's scratch block starts: its
                                result (when it has no out_leaf), then for
                                ATTENTION its score rows, for MUL_MAT with
                                Q8_0 / Q4_0 weights its quantized
                                activations (at the next 64-byte
                                boundary after the result, or at the start
                                with an out_leaf). For RESHAPE: the index
                                (leaf, or n_leaves + node) of the tensor it
                                aliases, never itself a RESHAPE. */
};

/* Validates a decoded graph before anything runs: op known and enabled, each
 * source's type and shape as the op requires (src/core/ops.h), parameters in
 * range, declared result type/shape equal to what the op produces, out_leaf
 * type and shape equal to the node's (and not one of the node's sources),
 * KV-cache sources of ATTENTION are leaves, at most max_nodes nodes.
 * Leaves must already have passed the wire checks (nbytes computed); the
 * leaves a node names are re-checked (known type, contiguous, nbytes).
 * plan has g->n_nodes entries (caller-owned). On success *scratch_bytes is
 * the arena size needed (a multiple of 64; each block 64-byte aligned; the
 * block of a result no longer read is reused). Returns 0 or
 * BATON_E_GRAPH / BATON_E_SHAPE / BATON_E_TYPE / BATON_E_UNSUPPORTED /
 * BATON_E_LIMIT / BATON_E_OVERFLOW, and also:
 *   BATON_E_INVAL  a parameter out of range (RMS_NORM eps < 0 or not finite,
 *                  SCALE not finite, ROPE n_dims odd/0/> ne[0] or freq_base
 *                  <= 0 or not finite, ATTENTION scale not finite), a
 *                  parameter word the op does not read that is not 0, or a
 *                  NULL argument;
 *   BATON_E_UNSUPPORTED  also for a ROPE mode other than 0 or an ATTENTION
 *                  score mode (p1) other than 0 (score * p0) or 1
 *                  (score / p0, the form of llama2.c's run.c);
 *   BATON_E_GRAPH  also when an out leaf holds one of the node's sources
 *                  (directly, through a RESHAPE, or as another node's out
 *                  leaf), or ATTENTION's caches are not two distinct leaves
 *                  or also hold another of its sources;
 *   BATON_E_NOMEM  the working arrays (about 36 bytes per node) could not
 *                  be allocated. */
int baton_graph_validate(const struct baton_graph *g, uint32_t max_nodes,
                         struct baton_node_plan *plan, uint64_t *scratch_bytes);

/* Executes a validated graph in node order. leaf_data[i] points at leaf i's
 * first byte (leaves[i].nbytes valid bytes, owned by the caller and pinned
 * for the call). scratch is at least scratch_bytes (64-byte aligned).
 * pool may be NULL (the caller's thread only). Results are the same bits
 * for any pool size. Returns 0 or BATON_E_INDEX when an index read from
 * data (GET_ROWS ids outside [0, rows), ROPE positions < 0, ATTENTION
 * positions outside [0, n_ctx)) is out of range; each such node checks all
 * its indices before it writes anything, but nodes before the failing one
 * may have written their out leaves and caches. BATON_E_INVAL, before any
 * node runs, when a leaf a node reads or writes has NULL or not 4-byte
 * aligned memory, or a needed scratch arena is NULL or misaligned. */
/* Taking turns with other sessions (src/server: compute_slice): between
 * nodes (and between the pieces of a large MUL_MAT or group of MUL_MATs
 * over one input), execution calls
 * between(arg), which may block while another session computes; when it
 * returns nonzero (the client is gone, the server stops) execution stops
 * there with BATON_E_IO. */
struct baton_exec_turns {
    int (*between)(void *arg);
    void *arg;
};

/* A turn's work per pool thread: with turns, a MUL_MAT (or a group of them
 * over one input, counted together) estimated above this many FLOPs times
 * the pool's threads runs in pieces of rows of W of at most about that
 * many, each a multiple of 16 rows per thread (at least that): about 2 ms
 * per thread at 500 GFLOP/s (AVX-512 K-quant prefill on one Zen 5 core),
 * 10 ms at 100 GFLOP/s, 100 ms at 10. A piece costs one more pool hand-off
 * and its threads' uneven finish (up to 16 rows' time); with 250 MFLOP
 * pieces whatever the threads, and row counts not a multiple of the
 * threads' units, those were 30 % of a 2-thread d4096 Q4_K_M prefill. */
#define BATON_GRAPH_TURN_FLOPS 1000000000ull

/* baton_graph_execute with turns (NULL: none, the same as
 * baton_graph_execute): the same results, bit for bit, with
 * turns->between called between nodes and between the row pieces of each
 * MUL_MAT, or group of MUL_MATs over one input, above
 * BATON_GRAPH_TURN_FLOPS (each piece writing its rows of its output in
 * place; the input quantized once for all the pieces). One more
 * error: BATON_E_IO when between asked to stop (earlier nodes and pieces
 * may have written their outputs, as for BATON_E_INDEX). */
int baton_graph_execute_turns(const struct baton_graph *g, uint8_t *const *leaf_data,
                              const struct baton_node_plan *plan, uint8_t *scratch,
                              struct baton_pool *pool, const struct baton_exec_turns *turns);

int baton_graph_execute(const struct baton_graph *g, uint8_t *const *leaf_data,
                        const struct baton_node_plan *plan, uint8_t *scratch,
                        struct baton_pool *pool);

/* Bytes of ATTENTION's work area (its score rows) in the scratch arena,
 * for queries {hd, nh, nt} over a cache of n_ctx cells: min(nh x nt,
 * BATON_POOL_MAX_THREADS) rows of n_ctx floats (none when hd is 0), and
 * with binary16 caches (cache_f16) as many windows of
 * BATON_CPU_ATT_F16_ROWS converted key rows of hd floats (cpu/kernels.h), as
 * baton_graph_validate sizes it; UINT64_MAX when that overflows. Every
 * cell counts, also with several sequences ({nt,3} positions), where a
 * row reads only its sequence's cells: the window is data, the size is
 * fixed at validation. The coordinator uses it to say what a refused step
 * asked for. */
uint64_t baton_attention_work_bytes(uint64_t hd, uint64_t nh, uint64_t nt, uint64_t n_ctx,
                                   int cache_f16);

/* Bytes a server holds for graph g once it is registered (GRAPH_REGISTER:
 * its leaves, nodes and per-node plan, charged to the session's memory);
 * the coordinator counts the same before it uploads (src/model/run_upload.c).
 * n_leaves and n_nodes are 32-bit counts: no overflow. */
uint64_t baton_graph_stored_bytes(const struct baton_graph *g);

/* Estimated floating-point operations of a validated graph (for the compute
 * budget of issue 3): MUL_MAT 2*K*N*M, ATTENTION 4*hd*nh*nt*n_ctx, SAMPLE 32 per
 * logit, ARGMAX its source's elements, RESHAPE 0, other ops their result's
 * elements.
 * Saturates at UINT64_MAX. */
uint64_t baton_graph_flops(const struct baton_graph *g);

#endif
