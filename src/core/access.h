/* Address, length and index arithmetic on wire values (issue 16,
 * verify/PROVEN.md "From the decoders to memory").
 *
 * Every offset, length or table index that the server derives from decoded
 * wire values is computed here, by small pure functions: plain integers in,
 * a status and the results out; no locks, no I/O, no globals, no libc, no
 * shifts. Each carries an ACSL contract in access.c and is proven with
 * Frama-C WP (run-time errors included) by verify/run.sh. The callers
 * (src/server, src/compute/graph.c) keep the threads, locks and I/O and
 * form a pointer only as `mem + at` from an `at` that a function here
 * returned together with its proof that [at, at + n) lies inside the
 * buffer's size bytes (mathematical integers: no wrap-around).
 *
 * Errors are the BATON_E_* codes of baton/status.h.
 */
#ifndef BATON_CORE_ACCESS_H
#define BATON_CORE_ACCESS_H

#include <stdint.h>

/* The bytes [off, off + n) of a tensor that occupies [t_offset, t_offset +
 * t_nbytes) of a buffer of size bytes (SET/GET/COPY_TENSOR(_TO), a grant's
 * range for PEER_WRITE). Returns 0 and *at = t_offset + off, with
 * [*at, *at + n) inside both the tensor and the buffer; BATON_E_BOUNDS when
 * off + n > t_nbytes, or else when t_offset + t_nbytes > size (in that
 * order); *at is untouched on failure. */
int baton_access_slice(uint64_t t_offset, uint64_t t_nbytes, uint64_t off, uint64_t n,
                       uint64_t size, uint64_t *at);

/* One piece of a transfer of n bytes into [start, start + n) of a buffer of
 * size bytes, done bytes of it already moved, at most cap bytes a piece:
 * 0 with *at = start + done and *k = min(n - done, cap) (> 0), so that
 * [*at, *at + *k) lies inside [start, start + n) and the buffer;
 * BATON_E_BOUNDS (outputs untouched) when start + n > size, done >= n or
 * cap == 0. */
int baton_access_piece(uint64_t start, uint64_t n, uint64_t done, uint64_t cap, uint64_t size,
                       uint64_t *at, uint64_t *k);

/* 1 if [a_off, a_off + a_n) and [b_off, b_off + b_n) share a byte (both
 * non-empty), else 0. Exact for all inputs (nothing is added, so nothing
 * wraps). */
int baton_access_overlap(uint64_t a_off, uint64_t a_n, uint64_t b_off, uint64_t b_n);

/* Splits a buffer handle (generation << 32 | index, server/handles.h) into
 * its index and generation: 0 when index < n_slots and generation != 0;
 * else BATON_E_STALE_HANDLE, outputs untouched. */
int baton_access_handle(uint64_t handle, uint32_t n_slots, uint32_t *index, uint32_t *generation);

/* The handle of slot index at generation: generation * 2^32 + index. */
uint64_t baton_access_handle_make(uint32_t generation, uint32_t index);

/* A handle-table entry found by index: BATON_E_STALE_HANDLE unless it is
 * live (live != 0) at the handle's generation, then BATON_E_NOT_OWNED
 * unless owner == session, else 0. */
int baton_access_handle_entry(int live, uint32_t entry_generation, uint32_t generation,
                              uint64_t owner, uint64_t session);

/* size rounded up to a multiple of unit: 0 and size <= *out < size + unit;
 * BATON_E_INVAL for unit 0, BATON_E_OVERFLOW when size + unit - 1 exceeds
 * 2^64 - 1 (outputs untouched on failure). */
int baton_access_round_up(uint64_t size, uint64_t unit, uint64_t *out);

/* 0 iff held + extra + want <= cap (no wrap), else BATON_E_QUOTA. */
int baton_access_quota(uint64_t held, uint64_t extra, uint64_t want, uint64_t cap);

/* a + b, or 2^64 - 1 where that sum would exceed it. */
uint64_t baton_access_add_sat(uint64_t a, uint64_t b);

/* A session's scratch arena of at least n bytes: the size to map, grown
 * geometrically from cur (twice cur, or cap once cur is over cap / 2; at
 * least n), rounded up to 4096. Requires nothing: 0 and n <= *want;
 * BATON_E_OVERFLOW when the rounding would wrap (*want untouched). */
int baton_access_scratch_grow(uint64_t cur, uint64_t n, uint64_t cap, uint64_t *want);

/* The scratch arena that fits a session holding held of its cap bytes:
 * BATON_E_QUOTA when held + n > cap; else 0 and *out = min(want, cap -
 * held), so held + *out <= cap, and n <= *out when n <= want. */
int baton_access_scratch_fit(uint64_t held, uint64_t n, uint64_t want, uint64_t cap,
                             uint64_t *out);

/* Places a scratch block of size bytes at offset cand of an arena whose
 * blocks so far end by *peak: BATON_E_OVERFLOW when cand + size exceeds
 * 2^64 - 1 (nothing written); else 0, *end = cand + size and *peak =
 * max(*peak, cand + size), so the block [cand, *end) ends by the new *peak
 * and *peak never falls. */
int baton_access_place(uint64_t cand, uint64_t size, uint64_t *end, uint64_t *peak);

/* A graph node's source slots (src[0 .. BATON_MAX_SRC - 1]) for an op of
 * arity sources, node number node_index of a graph with n_leaves leaves:
 * 0 when 1 <= arity <= BATON_MAX_SRC, every used slot names a leaf or an
 * earlier node (src[k] < n_leaves + node_index) and every unused slot is
 * BATON_SRC_NONE; BATON_E_GRAPH otherwise. */
int baton_access_node_srcs(const uint32_t *src, uint32_t arity, uint32_t n_leaves,
                           uint32_t node_index);

/* A node's out leaf: 0 when it is BATON_SRC_NONE or < n_leaves, else
 * BATON_E_GRAPH. */
int baton_access_out_leaf(uint32_t out_leaf, uint32_t n_leaves);

/* ATTENTION's two cache sources: 0 when both are leaves and distinct,
 * else BATON_E_GRAPH. */
int baton_access_cache_leaves(uint32_t k_cache, uint32_t v_cache, uint32_t n_leaves);

/* An index into a table of n entries (a leaf of a graph): 0 iff idx < n,
 * else BATON_E_GRAPH. */
int baton_access_index(uint32_t idx, uint32_t n);

/* Tensor index idx as a node of a graph with n_leaves leaves, of which
 * n_before nodes come earlier: 0 and *node = idx - n_leaves < n_before
 * when n_leaves <= idx < n_leaves + n_before; else BATON_E_GRAPH, *node
 * untouched. */
int baton_access_node_ref(uint32_t idx, uint32_t n_leaves, uint32_t n_before, uint32_t *node);

/* A route id (1 .. n_routes) to its index: 0 and *index = route - 1 <
 * n_routes; BATON_E_NOT_FOUND (untouched) otherwise. */
int baton_access_route(uint32_t route, uint32_t n_routes, uint32_t *index);

/* count 4-byte values at the start of nbytes bytes: 0 iff 4 * count <=
 * nbytes, else BATON_E_BOUNDS. */
int baton_access_i32_count(uint32_t count, uint64_t nbytes);

#endif
