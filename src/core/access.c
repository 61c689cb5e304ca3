/* Address, length and index arithmetic on wire values (access.h).
 *
 * Pure: no libc, no shifts, no globals. Every function carries an ACSL
 * contract and is proven by verify/run.sh (Frama-C WP, RTE goals included,
 * unsigned wrap-around and narrowing gated). The contracts require only
 * valid, separated output pointers, so each proof covers every input.
 * Range checks subtract, never add (STYLE.md).
 */
#include <stdint.h>

#include "baton/status.h"
#include "core/access.h"
#include "core/ops.h"

/*@ // Source slot k of a node with arity a: a used slot names a leaf or an
    // earlier node (< limit = n_leaves + node_index), an unused one is NONE.
    predicate slot_ok(integer a, integer k, integer s, integer limit) =
      (k < a ==> s < limit) && (k >= a ==> s == BATON_SRC_NONE);

    logic integer min(integer a, integer b) = a <= b ? a : b;

    // The size baton_access_scratch_grow rounds up: twice cur (cap once cur
    // is over cap / 2), at least n.
    logic integer grow_base(integer cur, integer n, integer cap) =
      (cur > cap / 2 ? cap : 2 * cur) < n ? n : (cur > cap / 2 ? cap : 2 * cur);
*/

/*@ requires \valid(at);
    assigns *at;
    behavior outside_tensor:
      assumes off + n > t_nbytes;
      assigns \nothing;
      ensures \result == BATON_E_BOUNDS;
    behavior outside_buffer:
      assumes off + n <= t_nbytes;
      assumes t_offset + t_nbytes > size;
      assigns \nothing;
      ensures \result == BATON_E_BOUNDS;
    behavior inside:
      assumes off + n <= t_nbytes;
      assumes t_offset + t_nbytes <= size;
      assigns *at;
      ensures \result == 0;
      ensures *at == t_offset + off;
      ensures t_offset <= *at && *at + n <= t_offset + t_nbytes;
      ensures *at + n <= size;
    complete behaviors;
    disjoint behaviors;
*/
int baton_access_slice(uint64_t t_offset, uint64_t t_nbytes, uint64_t off, uint64_t n,
                       uint64_t size, uint64_t *at)
{
    if (off > t_nbytes)
        return BATON_E_BOUNDS;
    if (n > t_nbytes - off)
        return BATON_E_BOUNDS;
    if (t_offset > size)
        return BATON_E_BOUNDS;
    if (t_nbytes > size - t_offset)
        return BATON_E_BOUNDS;
    //@ assert t_offset + off <= size;
    *at = t_offset + off;
    return 0;
}

/*@ requires \valid(at) && \valid(k);
    requires \separated(at, k);
    assigns *at, *k;
    behavior refused:
      assumes start + n > size || done >= n || cap == 0;
      assigns \nothing;
      ensures \result == BATON_E_BOUNDS;
    behavior piece:
      assumes start + n <= size && done < n && cap > 0;
      assigns *at, *k;
      ensures \result == 0;
      ensures *at == start + done;
      ensures *k == min(n - done, cap);
      ensures 0 < *k <= cap;
      ensures start <= *at && *at + *k <= start + n;
      ensures *at + *k <= size;
    complete behaviors;
    disjoint behaviors;
*/
int baton_access_piece(uint64_t start, uint64_t n, uint64_t done, uint64_t cap, uint64_t size,
                       uint64_t *at, uint64_t *k)
{
    if (start > size)
        return BATON_E_BOUNDS;
    if (n > size - start)
        return BATON_E_BOUNDS;
    if (done >= n)
        return BATON_E_BOUNDS;
    if (cap == 0)
        return BATON_E_BOUNDS;
    *k = n - done < cap ? n - done : cap;
    //@ assert start + done <= size;
    *at = start + done;
    return 0;
}

/*@ assigns \nothing;
    ensures \result == 0 || \result == 1;
    ensures \result == 1 <==>
      (a_n > 0 && b_n > 0 && a_off < b_off + b_n && b_off < a_off + a_n);
*/
int baton_access_overlap(uint64_t a_off, uint64_t a_n, uint64_t b_off, uint64_t b_n)
{
    if (a_n == 0)
        return 0;
    if (b_n == 0)
        return 0;
    if (a_off < b_off)
        return b_off - a_off < a_n;
    return a_off - b_off < b_n;
}

/*@ requires \valid(index) && \valid(generation);
    requires \separated(index, generation);
    assigns *index, *generation;
    behavior stale:
      assumes handle % 4294967296 >= n_slots || handle / 4294967296 == 0;
      assigns \nothing;
      ensures \result == BATON_E_STALE_HANDLE;
    behavior found:
      assumes handle % 4294967296 < n_slots && handle / 4294967296 != 0;
      assigns *index, *generation;
      ensures \result == 0;
      ensures *index == handle % 4294967296 && *index < n_slots;
      ensures *generation == handle / 4294967296 && *generation != 0;
      ensures handle == *generation * 4294967296 + *index;
    complete behaviors;
    disjoint behaviors;
*/
int baton_access_handle(uint64_t handle, uint32_t n_slots, uint32_t *index, uint32_t *generation)
{
    uint64_t lo = handle % 4294967296ull;
    uint64_t hi = handle / 4294967296ull;
    if (lo >= n_slots)
        return BATON_E_STALE_HANDLE;
    if (hi == 0)
        return BATON_E_STALE_HANDLE;
    //@ assert hi <= 4294967295;
    *index = (uint32_t)lo;
    *generation = (uint32_t)hi;
    return 0;
}

/*@ assigns \nothing;
    ensures \result == generation * 4294967296 + index;
    ensures \result % 4294967296 == index && \result / 4294967296 == generation;
*/
uint64_t baton_access_handle_make(uint32_t generation, uint32_t index)
{
    //@ assert generation * 4294967296 + index <= UINT64_MAX;
    return (uint64_t)generation * 4294967296ull + index;
}

/*@ assigns \nothing;
    behavior stale:
      assumes live == 0 || entry_generation != generation;
      ensures \result == BATON_E_STALE_HANDLE;
    behavior not_owned:
      assumes live != 0 && entry_generation == generation && owner != session;
      ensures \result == BATON_E_NOT_OWNED;
    behavior owned:
      assumes live != 0 && entry_generation == generation && owner == session;
      ensures \result == 0;
    complete behaviors;
    disjoint behaviors;
*/
int baton_access_handle_entry(int live, uint32_t entry_generation, uint32_t generation,
                              uint64_t owner, uint64_t session)
{
    if (live == 0)
        return BATON_E_STALE_HANDLE;
    if (entry_generation != generation)
        return BATON_E_STALE_HANDLE;
    if (owner != session)
        return BATON_E_NOT_OWNED;
    return 0;
}

/*@ requires \valid(out);
    assigns *out;
    behavior no_unit:
      assumes unit == 0;
      assigns \nothing;
      ensures \result == BATON_E_INVAL;
    behavior wraps:
      assumes unit > 0 && size + (unit - 1) > UINT64_MAX;
      assigns \nothing;
      ensures \result == BATON_E_OVERFLOW;
    behavior rounded:
      assumes unit > 0 && size + (unit - 1) <= UINT64_MAX;
      assigns *out;
      ensures \result == 0;
      ensures size <= *out < size + unit;
      ensures *out == size + (unit - 1) - (size + (unit - 1)) % unit;
    complete behaviors;
    disjoint behaviors;
*/
int baton_access_round_up(uint64_t size, uint64_t unit, uint64_t *out)
{
    uint64_t s;
    if (unit == 0)
        return BATON_E_INVAL;
    if (size > UINT64_MAX - (unit - 1))
        return BATON_E_OVERFLOW;
    s = size + (unit - 1);
    //@ assert 0 <= s % unit < unit;
    *out = s - s % unit;
    return 0;
}

/*@ assigns \nothing;
    behavior fits:
      assumes held + extra + want <= cap;
      ensures \result == 0;
    behavior over:
      assumes held + extra + want > cap;
      ensures \result == BATON_E_QUOTA;
    complete behaviors;
    disjoint behaviors;
*/
int baton_access_quota(uint64_t held, uint64_t extra, uint64_t want, uint64_t cap)
{
    if (held > cap)
        return BATON_E_QUOTA;
    if (extra > cap - held)
        return BATON_E_QUOTA;
    if (want > cap - held - extra)
        return BATON_E_QUOTA;
    return 0;
}

/*@ assigns \nothing;
    ensures \result == min(a + b, UINT64_MAX);
*/
uint64_t baton_access_add_sat(uint64_t a, uint64_t b)
{
    if (a > UINT64_MAX - b)
        return UINT64_MAX;
    return a + b;
}

/*@ requires \valid(want);
    assigns *want;
    behavior wraps:
      assumes grow_base(cur, n, cap) + 4095 > UINT64_MAX;
      assigns \nothing;
      ensures \result == BATON_E_OVERFLOW;
    behavior grown:
      assumes grow_base(cur, n, cap) + 4095 <= UINT64_MAX;
      assigns *want;
      ensures \result == 0;
      ensures grow_base(cur, n, cap) <= *want < grow_base(cur, n, cap) + 4096;
      ensures n <= *want;
    complete behaviors;
    disjoint behaviors;
*/
int baton_access_scratch_grow(uint64_t cur, uint64_t n, uint64_t cap, uint64_t *want)
{
    uint64_t w;
    if (cur > cap / 2) {
        w = cap;
    } else {
        //@ assert 2 * cur <= cap;
        w = cur * 2;
    }
    if (w < n)
        w = n;
    //@ assert w == grow_base(cur, n, cap);
    if (w > UINT64_MAX - 4095)
        return BATON_E_OVERFLOW; /* before the call: nothing is written */
    return baton_access_round_up(w, 4096, want);
}

/*@ requires \valid(out);
    assigns *out;
    behavior over:
      assumes held + n > cap;
      assigns \nothing;
      ensures \result == BATON_E_QUOTA;
    behavior fits:
      assumes held + n <= cap;
      assigns *out;
      ensures \result == 0;
      ensures *out == min(want, cap - held);
      ensures held + *out <= cap;
      ensures n <= want ==> n <= *out;
    complete behaviors;
    disjoint behaviors;
*/
int baton_access_scratch_fit(uint64_t held, uint64_t n, uint64_t want, uint64_t cap,
                             uint64_t *out)
{
    if (held > cap)
        return BATON_E_QUOTA;
    if (n > cap - held)
        return BATON_E_QUOTA;
    *out = want <= cap - held ? want : cap - held;
    return 0;
}

/*@ requires \valid(end) && \valid(peak);
    requires \separated(end, peak);
    assigns *end, *peak;
    behavior wraps:
      assumes cand + size > UINT64_MAX;
      assigns \nothing;
      ensures \result == BATON_E_OVERFLOW;
    behavior placed:
      assumes cand + size <= UINT64_MAX;
      assigns *end, *peak;
      ensures \result == 0;
      ensures *end == cand + size;
      ensures *peak == (\old(*peak) < cand + size ? cand + size : \old(*peak));
      ensures cand + size <= *peak && \old(*peak) <= *peak;
    complete behaviors;
    disjoint behaviors;
*/
int baton_access_place(uint64_t cand, uint64_t size, uint64_t *end, uint64_t *peak)
{
    if (size > UINT64_MAX - cand)
        return BATON_E_OVERFLOW;
    *end = cand + size;
    if (*end > *peak)
        *peak = *end;
    return 0;
}

/*@ requires \valid_read(src + (0 .. BATON_MAX_SRC - 1));
    assigns \nothing;
    behavior valid:
      assumes 1 <= arity <= BATON_MAX_SRC;
      assumes \forall integer k; 0 <= k < BATON_MAX_SRC ==>
                slot_ok(arity, k, src[k], n_leaves + node_index);
      ensures \result == 0;
    behavior invalid:
      assumes !(1 <= arity <= BATON_MAX_SRC) ||
              !(\forall integer k; 0 <= k < BATON_MAX_SRC ==>
                  slot_ok(arity, k, src[k], n_leaves + node_index));
      ensures \result == BATON_E_GRAPH;
    complete behaviors;
    disjoint behaviors;
*/
int baton_access_node_srcs(const uint32_t *src, uint32_t arity, uint32_t n_leaves,
                           uint32_t node_index)
{
    uint32_t k;
    if (arity == 0)
        return BATON_E_GRAPH;
    if (arity > BATON_MAX_SRC)
        return BATON_E_GRAPH;
    /*@ loop invariant 0 <= k <= BATON_MAX_SRC;
        loop invariant \forall integer j; 0 <= j < k ==>
                         slot_ok(arity, j, src[j], n_leaves + node_index);
        loop assigns k;
        loop variant BATON_MAX_SRC - k;
    */
    for (k = 0; k < BATON_MAX_SRC; k++) {
        if (k >= arity) {
            if (src[k] != BATON_SRC_NONE)
                return BATON_E_GRAPH;
        } else if (src[k] >= n_leaves) {
            if (src[k] - n_leaves >= node_index)
                return BATON_E_GRAPH;
        }
    }
    return 0;
}

/*@ assigns \nothing;
    behavior valid:
      assumes out_leaf == BATON_SRC_NONE || out_leaf < n_leaves;
      ensures \result == 0;
    behavior invalid:
      assumes out_leaf != BATON_SRC_NONE && out_leaf >= n_leaves;
      ensures \result == BATON_E_GRAPH;
    complete behaviors;
    disjoint behaviors;
*/
int baton_access_out_leaf(uint32_t out_leaf, uint32_t n_leaves)
{
    if (out_leaf == BATON_SRC_NONE)
        return 0;
    if (out_leaf >= n_leaves)
        return BATON_E_GRAPH;
    return 0;
}

/*@ assigns \nothing;
    behavior valid:
      assumes k_cache < n_leaves && v_cache < n_leaves && k_cache != v_cache;
      ensures \result == 0;
    behavior invalid:
      assumes !(k_cache < n_leaves && v_cache < n_leaves && k_cache != v_cache);
      ensures \result == BATON_E_GRAPH;
    complete behaviors;
    disjoint behaviors;
*/
int baton_access_cache_leaves(uint32_t k_cache, uint32_t v_cache, uint32_t n_leaves)
{
    if (k_cache >= n_leaves)
        return BATON_E_GRAPH;
    if (v_cache >= n_leaves)
        return BATON_E_GRAPH;
    if (k_cache == v_cache)
        return BATON_E_GRAPH;
    return 0;
}

/*@ assigns \nothing;
    behavior inside:
      assumes idx < n;
      ensures \result == 0;
    behavior outside:
      assumes idx >= n;
      ensures \result == BATON_E_GRAPH;
    complete behaviors;
    disjoint behaviors;
*/
int baton_access_index(uint32_t idx, uint32_t n)
{
    if (idx >= n)
        return BATON_E_GRAPH;
    return 0;
}

/*@ requires \valid(node);
    assigns *node;
    behavior earlier_node:
      assumes n_leaves <= idx < n_leaves + n_before;
      assigns *node;
      ensures \result == 0;
      ensures *node == idx - n_leaves && *node < n_before;
    behavior invalid:
      assumes !(n_leaves <= idx < n_leaves + n_before);
      assigns \nothing;
      ensures \result == BATON_E_GRAPH;
    complete behaviors;
    disjoint behaviors;
*/
int baton_access_node_ref(uint32_t idx, uint32_t n_leaves, uint32_t n_before, uint32_t *node)
{
    if (idx < n_leaves)
        return BATON_E_GRAPH;
    if (idx - n_leaves >= n_before)
        return BATON_E_GRAPH;
    *node = idx - n_leaves;
    return 0;
}

/*@ requires \valid(index);
    assigns *index;
    behavior found:
      assumes 1 <= route <= n_routes;
      assigns *index;
      ensures \result == 0;
      ensures *index == route - 1 && *index < n_routes;
    behavior not_found:
      assumes !(1 <= route <= n_routes);
      assigns \nothing;
      ensures \result == BATON_E_NOT_FOUND;
    complete behaviors;
    disjoint behaviors;
*/
int baton_access_route(uint32_t route, uint32_t n_routes, uint32_t *index)
{
    if (route == 0)
        return BATON_E_NOT_FOUND;
    if (route > n_routes)
        return BATON_E_NOT_FOUND;
    *index = route - 1;
    return 0;
}

/*@ assigns \nothing;
    behavior fits:
      assumes 4 * count <= nbytes;
      ensures \result == 0;
    behavior too_many:
      assumes 4 * count > nbytes;
      ensures \result == BATON_E_BOUNDS;
    complete behaviors;
    disjoint behaviors;
*/
int baton_access_i32_count(uint32_t count, uint64_t nbytes)
{
    //@ assert 4 * count <= UINT64_MAX;
    if (4u * (uint64_t)count > nbytes)
        return BATON_E_BOUNDS;
    return 0;
}
