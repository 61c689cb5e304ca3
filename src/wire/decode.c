/* Wire decoders (wire.h, docs/PROTOCOL.md).
 *
 * Pure: no libc, no shifts, no allocation; little-endian integers are
 * assembled by multiplication. Every function here carries an ACSL contract
 * and is proven by verify/run.sh (Frama-C WP, RTE goals included). The
 * contracts require only valid, separated pointers, so they hold for every
 * byte string. Each decoder first checks that its whole fixed-size record
 * lies in [*pos, len), reads it in place and advances *pos only on success.
 */
#include <stddef.h>
#include <stdint.h>

#include "baton/status.h"
#include "core/ops.h"
#include "core/types.h"
#include "wire/wire.h"

/*@ // n bytes remain after pos (in mathematical integers: no wrap).
    predicate room(integer len, integer pos, integer n) = pos + n <= len;

    // Little-endian values of the bytes at p. Declared with defining axioms
    // rather than as plain definitions so that the provers unfold them only
    // where a goal is about bytes (the loads), not in every decoder goal.
    axiomatic LittleEndian {
      logic integer le16{L}(uint8_t *p) reads p[0 .. 1];
      logic integer le32{L}(uint8_t *p) reads p[0 .. 3];
      logic integer le64{L}(uint8_t *p) reads p[0 .. 7];
      axiom le16_def{L}: \forall uint8_t *p; le16(p) == p[0] + 256 * p[1];
      axiom le32_def{L}: \forall uint8_t *p;
        le32(p) == p[0] + 256 * p[1] + 65536 * p[2] + 16777216 * p[3];
      axiom le64_def{L}: \forall uint8_t *p; le64(p) == le32(p) + 4294967296 * le32(p + 4);
    }

    // core/types.h: the accepted type ids and their block layouts.
    predicate known_type(integer t) = t == 0 || t == 1 || t == 2 || t == 8 || t == 26;
    logic integer blk_elems(integer t) = (t == 2 || t == 8) ? 32 : 1;
    logic integer blk_bytes(integer t) =
      t == 0 ? 4 : t == 1 ? 2 : t == 2 ? 18 : t == 8 ? 34 : 4;

    // Contiguous strides (core/tensor.h): nb[0] = block bytes, nb[1] = nb[0] *
    // ne[0] / block_elems, nb[i] = nb[i-1] * ne[i-1]; extent = nb[3] * ne[3].
    logic integer stride1(integer t, integer n0) = blk_bytes(t) * (n0 / blk_elems(t));
    logic integer stride2(integer t, integer n0, integer n1) = stride1(t, n0) * n1;
    logic integer stride3(integer t, integer n0, integer n1, integer n2) =
      stride2(t, n0, n1) * n2;
    logic integer extent(integer t, integer n0, integer n1, integer n2, integer n3) =
      stride3(t, n0, n1, n2) * n3;

    predicate dims_ok(integer n0, integer n1, integer n2, integer n3) =
      n0 <= BATON_MAX_DIM_ELEMS && n1 <= BATON_MAX_DIM_ELEMS &&
      n2 <= BATON_MAX_DIM_ELEMS && n3 <= BATON_MAX_DIM_ELEMS;
    predicate strides_fit(integer t, integer n0, integer n1, integer n2) =
      stride1(t, n0) <= UINT64_MAX && stride2(t, n0, n1) <= UINT64_MAX &&
      stride3(t, n0, n1, n2) <= UINT64_MAX;
    predicate strides_eq(integer t, integer n0, integer n1, integer n2,
                         integer b0, integer b1, integer b2, integer b3) =
      b0 == blk_bytes(t) && b1 == stride1(t, n0) && b2 == stride2(t, n0, n1) &&
      b3 == stride3(t, n0, n1, n2);

    // The status of baton_wire_tensor_extent, checks in protocol order (the
    // conditions spell out known_type, dims_ok, strides_fit, strides_eq).
    logic integer extent_rc(integer t, integer n0, integer n1, integer n2, integer n3,
                            integer b0, integer b1, integer b2, integer b3) =
      !(t == 0 || t == 1 || t == 2 || t == 8 || t == 26) ? BATON_E_TYPE :
      !(n0 <= BATON_MAX_DIM_ELEMS && n1 <= BATON_MAX_DIM_ELEMS &&
        n2 <= BATON_MAX_DIM_ELEMS && n3 <= BATON_MAX_DIM_ELEMS) ? BATON_E_LIMIT :
      n0 % blk_elems(t) != 0 ? BATON_E_SHAPE :
      !(stride1(t, n0) <= UINT64_MAX && stride2(t, n0, n1) <= UINT64_MAX &&
        stride3(t, n0, n1, n2) <= UINT64_MAX) ? BATON_E_OVERFLOW :
      !(b0 == blk_bytes(t) && b1 == stride1(t, n0) && b2 == stride2(t, n0, n1) &&
        b3 == stride3(t, n0, n1, n2)) ? BATON_E_SHAPE :
      extent(t, n0, n1, n2, n3) > UINT64_MAX ? BATON_E_OVERFLOW : 0;

    // core/ops.c: number of sources per op id, 0 for an unknown id. Given
    // by axioms (one per id) so that goals keep arity(op) as one term.
    axiomatic Arity {
      logic integer arity(integer op);
      axiom arity_unary: \forall integer op;
        op == BATON_OP_RMS_NORM || op == BATON_OP_SCALE || op == BATON_OP_SILU ||
        op == BATON_OP_ARGMAX || op == BATON_OP_RESHAPE ==> arity(op) == 1;
      axiom arity_binary: \forall integer op;
        op == BATON_OP_GET_ROWS || op == BATON_OP_MUL_MAT || op == BATON_OP_ADD ||
        op == BATON_OP_MUL || op == BATON_OP_ROPE ==> arity(op) == 2;
      axiom arity_attention: arity(BATON_OP_ATTENTION) == 6;
      axiom arity_unknown: \forall integer op;
        op < BATON_OP_GET_ROWS || op >= BATON_OP_COUNT ==> arity(op) == 0;
    }

    // Source slot k of a node with arity a: used slots name a leaf or an
    // earlier node (< limit = n_leaves + node_index), unused ones are NONE.
    predicate src_ok(integer a, integer k, integer s, integer limit) =
      (k < a ==> s < limit) && (k >= a ==> s == BATON_SRC_NONE);
    predicate srcs_ok(integer a, integer s0, integer s1, integer s2, integer s3, integer s4,
                      integer s5, integer limit) =
      src_ok(a, 0, s0, limit) && src_ok(a, 1, s1, limit) && src_ok(a, 2, s2, limit) &&
      src_ok(a, 3, s3, limit) && src_ok(a, 4, s4, limit) && src_ok(a, 5, s5, limit);
    predicate out_leaf_ok(integer o, integer n_leaves) =
      o == BATON_SRC_NONE || o < n_leaves;
*/

/* Shorthands for the contracts below (annotations are preprocessed): the
 * checks of a tensor descriptor or graph node applied to the fields read at
 * byte pointer P. Macros rather than logic functions over P, so that each
 * goal names the very field terms the code produced. */
#define DESC_RC(P)                                                                   \
    extent_rc(le32((P) + 16), le64((P) + 24), le64((P) + 32), le64((P) + 40),        \
              le64((P) + 48), le64((P) + 56), le64((P) + 64), le64((P) + 72),        \
              le64((P) + 80))
#define DESC_EXTENT(P)                                                               \
    extent(le32((P) + 16), le64((P) + 24), le64((P) + 32), le64((P) + 40), le64((P) + 48))
#define SRCS_OK(P, LIMIT)                                                            \
    srcs_ok(arity(le32(P)), le32((P) + 40), le32((P) + 44), le32((P) + 48),          \
            le32((P) + 52), le32((P) + 56), le32((P) + 60), (LIMIT))

/*@ requires \valid_read(p + (0 .. 1));
    assigns \nothing;
    ensures \result == le16(p);
*/
static uint16_t load16(const uint8_t *p)
{
    return (uint16_t)((uint32_t)p[0] + 256u * p[1]);
}

/*@ requires \valid_read(p + (0 .. 3));
    assigns \nothing;
    ensures \result == le32(p);
*/
static uint32_t load32(const uint8_t *p)
{
    return (uint32_t)p[0] + 256u * p[1] + 65536u * p[2] + 16777216u * p[3];
}

/*@ requires \valid_read(p + (0 .. 7));
    assigns \nothing;
    ensures \result == le64(p);
*/
static uint64_t load64(const uint8_t *p)
{
    uint64_t lo = load32(p);
    uint64_t hi = load32(p + 4);
    //@ assert lo + 4294967296 * hi <= UINT64_MAX;
    return lo + 4294967296u * hi;
}

/*@ assigns \nothing;
    ensures room(len, pos, n) ==> \result == 1;
    ensures !room(len, pos, n) ==> \result == 0;
*/
static int have(size_t len, size_t pos, size_t n)
{
    return pos <= len && n <= len - pos;
}

/*@ requires \valid(pos) && \valid(out) && \valid_read(buf + (0 .. len - 1));
    requires \separated(pos, out, buf + (0 .. len - 1));
    assigns *pos, *out;
    behavior truncated:
      assumes !room(len, *pos, 1);
      assigns \nothing;
      ensures \result == BATON_E_TRUNCATED;
    behavior ok:
      assumes room(len, *pos, 1);
      ensures \result == 0;
      ensures *out == buf[\old(*pos)];
      ensures *pos == \old(*pos) + 1 && *pos <= len;
    complete behaviors;
    disjoint behaviors;
*/
int baton_wire_get_u8(const uint8_t *buf, size_t len, size_t *pos, uint8_t *out)
{
    if (!have(len, *pos, 1))
        return BATON_E_TRUNCATED;
    *out = buf[*pos];
    *pos = *pos + 1;
    return 0;
}

/*@ requires \valid(pos) && \valid(out) && \valid_read(buf + (0 .. len - 1));
    requires \separated(pos, out, buf + (0 .. len - 1));
    assigns *pos, *out;
    behavior truncated:
      assumes !room(len, *pos, 2);
      assigns \nothing;
      ensures \result == BATON_E_TRUNCATED;
    behavior ok:
      assumes room(len, *pos, 2);
      ensures \result == 0;
      ensures *out == le16(buf + \old(*pos));
      ensures *pos == \old(*pos) + 2 && *pos <= len;
    complete behaviors;
    disjoint behaviors;
*/
int baton_wire_get_u16(const uint8_t *buf, size_t len, size_t *pos, uint16_t *out)
{
    if (!have(len, *pos, 2))
        return BATON_E_TRUNCATED;
    *out = load16(buf + *pos);
    *pos = *pos + 2;
    return 0;
}

/*@ requires \valid(pos) && \valid(out) && \valid_read(buf + (0 .. len - 1));
    requires \separated(pos, out, buf + (0 .. len - 1));
    assigns *pos, *out;
    behavior truncated:
      assumes !room(len, *pos, 4);
      assigns \nothing;
      ensures \result == BATON_E_TRUNCATED;
    behavior ok:
      assumes room(len, *pos, 4);
      ensures \result == 0;
      ensures *out == le32(buf + \old(*pos));
      ensures *pos == \old(*pos) + 4 && *pos <= len;
    complete behaviors;
    disjoint behaviors;
*/
int baton_wire_get_u32(const uint8_t *buf, size_t len, size_t *pos, uint32_t *out)
{
    if (!have(len, *pos, 4))
        return BATON_E_TRUNCATED;
    *out = load32(buf + *pos);
    *pos = *pos + 4;
    return 0;
}

/*@ requires \valid(pos) && \valid(out) && \valid_read(buf + (0 .. len - 1));
    requires \separated(pos, out, buf + (0 .. len - 1));
    assigns *pos, *out;
    behavior truncated:
      assumes !room(len, *pos, 8);
      assigns \nothing;
      ensures \result == BATON_E_TRUNCATED;
    behavior ok:
      assumes room(len, *pos, 8);
      ensures \result == 0;
      ensures *out == le64(buf + \old(*pos));
      ensures *pos == \old(*pos) + 8 && *pos <= len;
    complete behaviors;
    disjoint behaviors;
*/
int baton_wire_get_u64(const uint8_t *buf, size_t len, size_t *pos, uint64_t *out)
{
    if (!have(len, *pos, 8))
        return BATON_E_TRUNCATED;
    *out = load64(buf + *pos);
    *pos = *pos + 8;
    return 0;
}

/*@ requires \valid(pos) && \valid(out) && \valid_read(buf + (0 .. len - 1));
    requires \separated(pos, out, buf + (0 .. len - 1));
    assigns *pos, *out;
    behavior truncated:
      assumes !room(len, *pos, 24);
      ensures *pos == \old(*pos);
      ensures \result == BATON_E_TRUNCATED;
    behavior bad_magic:
      assumes room(len, *pos, 24);
      assumes !(buf[*pos] == 0x42 && buf[*pos + 1] == 0x41 && buf[*pos + 2] == 0x54 &&
                buf[*pos + 3] == 0x4E);
      ensures *pos == \old(*pos);
      ensures \result == BATON_E_MAGIC;
    behavior bad_cmd:
      assumes room(len, *pos, 24);
      assumes buf[*pos] == 0x42 && buf[*pos + 1] == 0x41 && buf[*pos + 2] == 0x54 &&
              buf[*pos + 3] == 0x4E;
      assumes buf[*pos + 4] == 0 || buf[*pos + 4] >= BATON_CMD_LIMIT;
      ensures *pos == \old(*pos);
      ensures \result == BATON_E_CMD;
    behavior bad_reserved:
      assumes room(len, *pos, 24);
      assumes buf[*pos] == 0x42 && buf[*pos + 1] == 0x41 && buf[*pos + 2] == 0x54 &&
              buf[*pos + 3] == 0x4E;
      assumes 0 < buf[*pos + 4] < BATON_CMD_LIMIT;
      assumes buf[*pos + 5] != 0 || le32(buf + *pos + 12) != 0;
      ensures *pos == \old(*pos);
      ensures \result == BATON_E_INVAL;
    behavior too_long:
      assumes room(len, *pos, 24);
      assumes buf[*pos] == 0x42 && buf[*pos + 1] == 0x41 && buf[*pos + 2] == 0x54 &&
              buf[*pos + 3] == 0x4E;
      assumes 0 < buf[*pos + 4] < BATON_CMD_LIMIT;
      assumes buf[*pos + 5] == 0 && le32(buf + *pos + 12) == 0;
      assumes le64(buf + *pos + 16) > max_len;
      ensures *pos == \old(*pos);
      ensures \result == BATON_E_LIMIT;
    behavior ok:
      assumes room(len, *pos, 24);
      assumes buf[*pos] == 0x42 && buf[*pos + 1] == 0x41 && buf[*pos + 2] == 0x54 &&
              buf[*pos + 3] == 0x4E;
      assumes 0 < buf[*pos + 4] < BATON_CMD_LIMIT;
      assumes buf[*pos + 5] == 0 && le32(buf + *pos + 12) == 0;
      assumes le64(buf + *pos + 16) <= max_len;
      ensures \result == 0;
      ensures *pos == \old(*pos) + 24 && *pos <= len;
      ensures 0 < out->cmd < BATON_CMD_LIMIT && out->flags == 0;
      ensures out->cmd == buf[\old(*pos) + 4];
      ensures out->status == le16(buf + \old(*pos) + 6);
      ensures out->seq == le32(buf + \old(*pos) + 8);
      ensures out->len == le64(buf + \old(*pos) + 16) && out->len <= max_len;
    complete behaviors;
    disjoint behaviors;
*/
int baton_wire_decode_header(const uint8_t *buf, size_t len, size_t *pos, uint64_t max_len,
                             struct baton_frame_header *out)
{
    const uint8_t *p;

    if (!have(len, *pos, BATON_FRAME_HEADER_BYTES))
        return BATON_E_TRUNCATED;
    p = buf + *pos;
    if (p[0] != 0x42 || p[1] != 0x41 || p[2] != 0x54 || p[3] != 0x4E)
        return BATON_E_MAGIC;
    if (p[4] == 0 || p[4] >= BATON_CMD_LIMIT)
        return BATON_E_CMD;
    if (p[5] != 0 || load32(p + 12) != 0)
        return BATON_E_INVAL;
    if (load64(p + 16) > max_len)
        return BATON_E_LIMIT;
    out->cmd = p[4];
    out->flags = p[5];
    out->status = load16(p + 6);
    out->seq = load32(p + 8);
    out->len = load64(p + 16);
    *pos = *pos + BATON_FRAME_HEADER_BYTES;
    return 0;
}

/*@ requires \valid(pos) && \valid(out) && \valid_read(buf + (0 .. len - 1));
    requires \separated(pos, out, buf + (0 .. len - 1));
    assigns *pos, *out;
    behavior truncated:
      assumes !room(len, *pos, 48);
      ensures *pos == \old(*pos);
      ensures \result == BATON_E_TRUNCATED;
    behavior bad_fields:
      assumes room(len, *pos, 48);
      assumes buf[*pos + 5] != 0 || buf[*pos + 6] != 0 || buf[*pos + 7] != 0 ||
              le16(buf + *pos) > le16(buf + *pos + 2) || buf[*pos + 4] > BATON_ROLE_PEER;
      ensures *pos == \old(*pos);
      ensures \result == BATON_E_INVAL;
    behavior ok:
      assumes room(len, *pos, 48);
      assumes buf[*pos + 5] == 0 && buf[*pos + 6] == 0 && buf[*pos + 7] == 0 &&
              le16(buf + *pos) <= le16(buf + *pos + 2) && buf[*pos + 4] <= BATON_ROLE_PEER;
      ensures \result == 0;
      ensures *pos == \old(*pos) + 48 && *pos <= len;
      ensures out->version_min == le16(buf + \old(*pos));
      ensures out->version_max == le16(buf + \old(*pos) + 2);
      ensures out->version_min <= out->version_max;
      ensures out->role == buf[\old(*pos) + 4] && out->role <= BATON_ROLE_PEER;
      ensures out->features == le64(buf + \old(*pos) + 8);
      ensures \forall integer k; 0 <= k < 32 ==> out->nonce[k] == buf[\old(*pos) + 16 + k];
    complete behaviors;
    disjoint behaviors;
*/
int baton_wire_decode_hello(const uint8_t *buf, size_t len, size_t *pos, struct baton_hello *out)
{
    const uint8_t *p;
    size_t i;

    if (!have(len, *pos, BATON_HELLO_BYTES))
        return BATON_E_TRUNCATED;
    p = buf + *pos;
    if (p[5] != 0 || p[6] != 0 || p[7] != 0)
        return BATON_E_INVAL;
    if (load16(p) > load16(p + 2) || p[4] > BATON_ROLE_PEER)
        return BATON_E_INVAL;
    out->version_min = load16(p);
    out->version_max = load16(p + 2);
    out->role = p[4];
    out->features = load64(p + 8);
    /*@ loop invariant 0 <= i <= 32;
        loop invariant \forall integer k; 0 <= k < i ==> out->nonce[k] == p[16 + k];
        loop assigns i, out->nonce[0 .. 31];
        loop variant 32 - i;
    */
    for (i = 0; i < 32; i++)
        out->nonce[i] = p[16 + i];
    *pos = *pos + BATON_HELLO_BYTES;
    return 0;
}

/*@ requires \valid_read(ne + (0 .. 3)) && \valid(nb + (0 .. 3));
    requires \separated(ne + (0 .. 3), nb + (0 .. 3));
    assigns nb[0 .. 3];
    behavior bad_type:
      assumes !known_type(type);
      assigns \nothing;
      ensures \result == BATON_E_TYPE;
    behavior bad_block:
      assumes known_type(type) && ne[0] % blk_elems(type) != 0;
      assigns \nothing;
      ensures \result == BATON_E_SHAPE;
    behavior wraps:
      assumes known_type(type) && ne[0] % blk_elems(type) == 0;
      assumes !strides_fit(type, ne[0], ne[1], ne[2]);
      ensures \result == BATON_E_OVERFLOW;
    behavior ok:
      assumes known_type(type) && ne[0] % blk_elems(type) == 0;
      assumes strides_fit(type, ne[0], ne[1], ne[2]);
      ensures \result == 0;
      ensures strides_eq(type, ne[0], ne[1], ne[2], nb[0], nb[1], nb[2], nb[3]);
    complete behaviors;
    disjoint behaviors;
*/
int baton_tensor_contiguous_nb(uint32_t type, const uint64_t ne[4], uint64_t nb[4])
{
    uint32_t block_elems;
    uint32_t block_bytes;
    int rc;

    rc = baton_type_block(type, &block_elems, &block_bytes);
    if (rc != 0)
        return rc;
    if (ne[0] % block_elems != 0)
        return BATON_E_SHAPE;
    nb[0] = block_bytes;
    rc = baton_wire_mul_u64(block_bytes, ne[0] / block_elems, &nb[1]);
    if (rc != 0)
        return rc;
    rc = baton_wire_mul_u64(nb[1], ne[1], &nb[2]);
    if (rc != 0)
        return rc;
    return baton_wire_mul_u64(nb[2], ne[2], &nb[3]);
}

/*@ requires \valid_read(ne + (0 .. 3)) && \valid_read(nb + (0 .. 3)) && \valid(nbytes);
    requires \separated(nbytes, ne + (0 .. 3), nb + (0 .. 3));
    assigns *nbytes;
    ensures \result == extent_rc(type, ne[0], ne[1], ne[2], ne[3], nb[0], nb[1], nb[2], nb[3]);
    behavior bad_type:
      assumes !known_type(type);
      assigns \nothing;
      ensures \result == BATON_E_TYPE;
    behavior too_large:
      assumes known_type(type) && !dims_ok(ne[0], ne[1], ne[2], ne[3]);
      assigns \nothing;
      ensures \result == BATON_E_LIMIT;
    behavior bad_block:
      assumes known_type(type) && dims_ok(ne[0], ne[1], ne[2], ne[3]);
      assumes ne[0] % blk_elems(type) != 0;
      assigns \nothing;
      ensures \result == BATON_E_SHAPE;
    behavior stride_wraps:
      assumes known_type(type) && dims_ok(ne[0], ne[1], ne[2], ne[3]);
      assumes ne[0] % blk_elems(type) == 0;
      assumes !strides_fit(type, ne[0], ne[1], ne[2]);
      assigns \nothing;
      ensures \result == BATON_E_OVERFLOW;
    behavior bad_stride:
      assumes known_type(type) && dims_ok(ne[0], ne[1], ne[2], ne[3]);
      assumes ne[0] % blk_elems(type) == 0 && strides_fit(type, ne[0], ne[1], ne[2]);
      assumes !strides_eq(type, ne[0], ne[1], ne[2], nb[0], nb[1], nb[2], nb[3]);
      assigns \nothing;
      ensures \result == BATON_E_SHAPE;
    behavior extent_wraps:
      assumes known_type(type) && dims_ok(ne[0], ne[1], ne[2], ne[3]);
      assumes ne[0] % blk_elems(type) == 0 && strides_fit(type, ne[0], ne[1], ne[2]);
      assumes strides_eq(type, ne[0], ne[1], ne[2], nb[0], nb[1], nb[2], nb[3]);
      assumes extent(type, ne[0], ne[1], ne[2], ne[3]) > UINT64_MAX;
      assigns \nothing;
      ensures \result == BATON_E_OVERFLOW;
    behavior ok:
      assumes known_type(type) && dims_ok(ne[0], ne[1], ne[2], ne[3]);
      assumes ne[0] % blk_elems(type) == 0 && strides_fit(type, ne[0], ne[1], ne[2]);
      assumes strides_eq(type, ne[0], ne[1], ne[2], nb[0], nb[1], nb[2], nb[3]);
      assumes extent(type, ne[0], ne[1], ne[2], ne[3]) <= UINT64_MAX;
      ensures \result == 0;
      ensures *nbytes == extent(type, ne[0], ne[1], ne[2], ne[3]);
      ensures *nbytes == nb[3] * ne[3];
      ensures (ne[0] == 0 || ne[1] == 0 || ne[2] == 0 || ne[3] == 0) ==> *nbytes == 0;
    complete behaviors;
    disjoint behaviors;
*/
int baton_wire_tensor_extent(uint32_t type, const uint64_t ne[4], const uint64_t nb[4],
                             uint64_t *nbytes)
{
    uint32_t block_elems;
    uint32_t block_bytes;
    uint64_t want[4];
    uint64_t n;
    int rc;
    int i;

    rc = baton_type_block(type, &block_elems, &block_bytes);
    if (rc != 0)
        return rc;
    /*@ loop invariant 0 <= i <= 4;
        loop invariant \forall integer k; 0 <= k < i ==> ne[k] <= BATON_MAX_DIM_ELEMS;
        loop assigns i;
        loop variant 4 - i;
    */
    for (i = 0; i < 4; i++) {
        if (ne[i] > BATON_MAX_DIM_ELEMS)
            return BATON_E_LIMIT;
    }
    rc = baton_tensor_contiguous_nb(type, ne, want);
    if (rc != 0)
        return rc;
    /*@ loop invariant 0 <= i <= 4;
        loop invariant \forall integer k; 0 <= k < i ==> nb[k] == want[k];
        loop assigns i;
        loop variant 4 - i;
    */
    for (i = 0; i < 4; i++) {
        if (nb[i] != want[i])
            return BATON_E_SHAPE;
    }
    rc = baton_wire_mul_u64(want[3], ne[3], &n);
    if (rc != 0)
        return rc;
    *nbytes = n;
    return 0;
}

/*@ requires \valid(pos) && \valid(out) && \valid_read(buf + (0 .. len - 1));
    requires \separated(pos, out, buf + (0 .. len - 1));
    assigns *pos, *out;
    behavior truncated:
      assumes !room(len, *pos, 88);
      ensures *pos == \old(*pos);
      ensures \result == BATON_E_TRUNCATED;
    behavior bad_reserved:
      assumes room(len, *pos, 88) && le32(buf + *pos + 20) != 0;
      ensures *pos == \old(*pos);
      ensures \result == BATON_E_INVAL;
    behavior bad_extent:
      assumes room(len, *pos, 88) && le32(buf + *pos + 20) == 0;
      assumes DESC_RC(buf + *pos) != 0;
      ensures *pos == \old(*pos);
      ensures \result == DESC_RC(buf + \old(*pos)) && \result < 0;
    behavior end_wraps:
      assumes room(len, *pos, 88) && le32(buf + *pos + 20) == 0;
      assumes DESC_RC(buf + *pos) == 0;
      assumes le64(buf + *pos + 8) + DESC_EXTENT(buf + *pos) > UINT64_MAX;
      ensures *pos == \old(*pos);
      ensures \result == BATON_E_OVERFLOW;
    behavior ok:
      assumes room(len, *pos, 88) && le32(buf + *pos + 20) == 0;
      assumes DESC_RC(buf + *pos) == 0;
      assumes le64(buf + *pos + 8) + DESC_EXTENT(buf + *pos) <= UINT64_MAX;
      ensures \result == 0;
      ensures *pos == \old(*pos) + 88 && *pos <= len;
      ensures out->buffer == le64(buf + \old(*pos));
      ensures out->offset == le64(buf + \old(*pos) + 8);
      ensures out->type == le32(buf + \old(*pos) + 16) && known_type(out->type);
      ensures out->ne[0] == le64(buf + \old(*pos) + 24) &&
              out->ne[1] == le64(buf + \old(*pos) + 32) &&
              out->ne[2] == le64(buf + \old(*pos) + 40) &&
              out->ne[3] == le64(buf + \old(*pos) + 48);
      ensures out->nb[0] == le64(buf + \old(*pos) + 56) &&
              out->nb[1] == le64(buf + \old(*pos) + 64) &&
              out->nb[2] == le64(buf + \old(*pos) + 72) &&
              out->nb[3] == le64(buf + \old(*pos) + 80);
      ensures out->nbytes == extent(out->type, out->ne[0], out->ne[1], out->ne[2], out->ne[3]);
      ensures out->offset + out->nbytes <= UINT64_MAX;
    complete behaviors;
    disjoint behaviors;
*/
int baton_wire_decode_tensor(const uint8_t *buf, size_t len, size_t *pos,
                             struct baton_tensor_desc *out)
{
    const uint8_t *p;
    uint64_t buffer;
    uint64_t offset;
    uint32_t type;
    uint64_t ne[4];
    uint64_t nb[4];
    uint64_t nbytes;
    int rc;

    if (!have(len, *pos, BATON_TENSOR_DESC_BYTES))
        return BATON_E_TRUNCATED;
    p = buf + *pos;
    if (load32(p + 20) != 0)
        return BATON_E_INVAL;
    buffer = load64(p);
    offset = load64(p + 8);
    type = load32(p + 16);
    ne[0] = load64(p + 24);
    ne[1] = load64(p + 32);
    ne[2] = load64(p + 40);
    ne[3] = load64(p + 48);
    nb[0] = load64(p + 56);
    nb[1] = load64(p + 64);
    nb[2] = load64(p + 72);
    nb[3] = load64(p + 80);
    rc = baton_wire_tensor_extent(type, ne, nb, &nbytes);
    if (rc != 0)
        return rc;
    if (nbytes > UINT64_MAX - offset)
        return BATON_E_OVERFLOW;
    out->buffer = buffer;
    out->offset = offset;
    out->type = type;
    out->ne[0] = ne[0];
    out->ne[1] = ne[1];
    out->ne[2] = ne[2];
    out->ne[3] = ne[3];
    out->nb[0] = nb[0];
    out->nb[1] = nb[1];
    out->nb[2] = nb[2];
    out->nb[3] = nb[3];
    out->nbytes = nbytes;
    *pos = *pos + BATON_TENSOR_DESC_BYTES;
    return 0;
}

/*@ requires \valid(pos) && \valid(n_leaves) && \valid(n_nodes);
    requires \valid_read(buf + (0 .. len - 1));
    requires \separated(pos, n_leaves, n_nodes, buf + (0 .. len - 1));
    assigns *pos, *n_leaves, *n_nodes;
    behavior truncated:
      assumes !room(len, *pos, 8);
      ensures *pos == \old(*pos);
      ensures \result == BATON_E_TRUNCATED;
    behavior too_many:
      assumes room(len, *pos, 8);
      assumes le32(buf + *pos) > BATON_MAX_GRAPH_LEAVES ||
              le32(buf + *pos + 4) > BATON_MAX_GRAPH_NODES || le32(buf + *pos + 4) > max_nodes;
      ensures *pos == \old(*pos);
      ensures \result == BATON_E_LIMIT;
    behavior no_nodes:
      assumes room(len, *pos, 8);
      assumes le32(buf + *pos) <= BATON_MAX_GRAPH_LEAVES && le32(buf + *pos + 4) == 0;
      ensures *pos == \old(*pos);
      ensures \result == BATON_E_INVAL;
    behavior bad_length:
      assumes room(len, *pos, 8);
      assumes le32(buf + *pos) <= BATON_MAX_GRAPH_LEAVES;
      assumes 0 < le32(buf + *pos + 4) <= BATON_MAX_GRAPH_NODES &&
              le32(buf + *pos + 4) <= max_nodes;
      assumes *pos + 8 + 88 * le32(buf + *pos) + 104 * le32(buf + *pos + 4) != len;
      ensures *pos == \old(*pos);
      ensures \result == BATON_E_INVAL;
    behavior ok:
      assumes room(len, *pos, 8);
      assumes le32(buf + *pos) <= BATON_MAX_GRAPH_LEAVES;
      assumes 0 < le32(buf + *pos + 4) <= BATON_MAX_GRAPH_NODES &&
              le32(buf + *pos + 4) <= max_nodes;
      assumes *pos + 8 + 88 * le32(buf + *pos) + 104 * le32(buf + *pos + 4) == len;
      ensures \result == 0;
      ensures *pos == \old(*pos) + 8;
      ensures *n_leaves == le32(buf + \old(*pos)) && *n_leaves <= BATON_MAX_GRAPH_LEAVES;
      ensures *n_nodes == le32(buf + \old(*pos) + 4);
      ensures 0 < *n_nodes <= BATON_MAX_GRAPH_NODES && *n_nodes <= max_nodes;
      ensures *pos + 88 * *n_leaves + 104 * *n_nodes == len;
    complete behaviors;
    disjoint behaviors;
*/
int baton_wire_decode_graph_header(const uint8_t *buf, size_t len, size_t *pos,
                                   uint32_t max_nodes, uint32_t *n_leaves, uint32_t *n_nodes)
{
    const uint8_t *p;
    uint32_t leaves;
    uint32_t nodes;
    uint64_t need;
    size_t rest;

    if (!have(len, *pos, BATON_GRAPH_HEADER_BYTES))
        return BATON_E_TRUNCATED;
    p = buf + *pos;
    leaves = load32(p);
    nodes = load32(p + 4);
    if (leaves > BATON_MAX_GRAPH_LEAVES || nodes > BATON_MAX_GRAPH_NODES || nodes > max_nodes)
        return BATON_E_LIMIT;
    if (nodes == 0)
        return BATON_E_INVAL;
    //@ assert 88 * leaves + 104 * nodes <= UINT64_MAX;
    need = (uint64_t)leaves * BATON_TENSOR_DESC_BYTES + (uint64_t)nodes * BATON_GRAPH_NODE_BYTES;
    rest = len - *pos - BATON_GRAPH_HEADER_BYTES;
    if (rest != need)
        return BATON_E_INVAL;
    *n_leaves = leaves;
    *n_nodes = nodes;
    *pos = *pos + BATON_GRAPH_HEADER_BYTES;
    return 0;
}

/* The op catalogue's arity (core/ops.c), restated here so the proven set
 * does not depend on an unproven table; tests/unit/test_wire_decode.c checks
 * that both agree for every id. */
/*@ assigns \nothing;
    ensures \result == arity(op);
*/
static uint32_t op_arity(uint32_t op)
{
    switch (op) {
    case BATON_OP_RMS_NORM:
    case BATON_OP_SCALE:
    case BATON_OP_SILU:
    case BATON_OP_ARGMAX:
    case BATON_OP_RESHAPE:
        return 1;
    case BATON_OP_GET_ROWS:
    case BATON_OP_MUL_MAT:
    case BATON_OP_ADD:
    case BATON_OP_MUL:
    case BATON_OP_ROPE:
        return 2;
    case BATON_OP_ATTENTION:
        return 6;
    default:
        return 0;
    }
}

/*@ requires \valid_read(src + (0 .. BATON_MAX_SRC - 1));
    assigns \nothing;
    ensures srcs_ok(arity, src[0], src[1], src[2], src[3], src[4], src[5], limit) ==>
              \result == 1;
    ensures !srcs_ok(arity, src[0], src[1], src[2], src[3], src[4], src[5], limit) ==>
              \result == 0;
*/
static int srcs_valid(uint32_t arity, const uint32_t *src, uint64_t limit)
{
    int i;

    /*@ loop invariant 0 <= i <= BATON_MAX_SRC;
        loop invariant \forall integer k; 0 <= k < i ==> src_ok(arity, k, src[k], limit);
        loop assigns i;
        loop variant BATON_MAX_SRC - i;
    */
    for (i = 0; i < BATON_MAX_SRC; i++) {
        if ((uint32_t)i < arity) {
            if (src[i] >= limit)
                return 0;
        } else if (src[i] != BATON_SRC_NONE) {
            return 0;
        }
    }
    return 1;
}

/*@ assigns \nothing;
    ensures out_leaf_ok(leaf, n_leaves) ==> \result == 1;
    ensures !out_leaf_ok(leaf, n_leaves) ==> \result == 0;
*/
static int leaf_ref_valid(uint32_t leaf, uint32_t n_leaves)
{
    return leaf == BATON_SRC_NONE || leaf < n_leaves;
}

/*@ requires \valid(pos) && \valid(out) && \valid_read(buf + (0 .. len - 1));
    requires \separated(pos, out, buf + (0 .. len - 1));
    assigns *pos, *out;
    behavior truncated:
      assumes !room(len, *pos, 104);
      ensures *pos == \old(*pos);
      ensures \result == BATON_E_TRUNCATED;
    behavior bad_op:
      assumes room(len, *pos, 104) && arity(le32(buf + *pos)) == 0;
      ensures *pos == \old(*pos);
      ensures \result == BATON_E_GRAPH;
    behavior bad_src:
      assumes room(len, *pos, 104) && arity(le32(buf + *pos)) != 0;
      assumes !SRCS_OK(buf + *pos, n_leaves + node_index);
      ensures *pos == \old(*pos);
      ensures \result == BATON_E_GRAPH;
    behavior bad_out_leaf:
      assumes room(len, *pos, 104) && arity(le32(buf + *pos)) != 0;
      assumes SRCS_OK(buf + *pos, n_leaves + node_index);
      assumes !out_leaf_ok(le32(buf + *pos + 64), n_leaves);
      ensures *pos == \old(*pos);
      ensures \result == BATON_E_GRAPH;
    behavior bad_type:
      assumes room(len, *pos, 104) && arity(le32(buf + *pos)) != 0;
      assumes SRCS_OK(buf + *pos, n_leaves + node_index);
      assumes out_leaf_ok(le32(buf + *pos + 64), n_leaves);
      assumes !known_type(le32(buf + *pos + 4));
      ensures *pos == \old(*pos);
      ensures \result == BATON_E_TYPE;
    behavior bad_reserved:
      assumes room(len, *pos, 104) && arity(le32(buf + *pos)) != 0;
      assumes SRCS_OK(buf + *pos, n_leaves + node_index);
      assumes out_leaf_ok(le32(buf + *pos + 64), n_leaves);
      assumes known_type(le32(buf + *pos + 4));
      assumes le32(buf + *pos + 100) != 0;
      ensures *pos == \old(*pos);
      ensures \result == BATON_E_INVAL;
    behavior ok:
      assumes room(len, *pos, 104) && arity(le32(buf + *pos)) != 0;
      assumes SRCS_OK(buf + *pos, n_leaves + node_index);
      assumes out_leaf_ok(le32(buf + *pos + 64), n_leaves);
      assumes known_type(le32(buf + *pos + 4));
      assumes le32(buf + *pos + 100) == 0;
      ensures \result == 0;
      ensures *pos == \old(*pos) + 104 && *pos <= len;
      ensures out->op == le32(buf + \old(*pos)) && 1 <= arity(out->op) <= BATON_MAX_SRC;
      ensures out->type == le32(buf + \old(*pos) + 4) && known_type(out->type);
      ensures out->ne[0] == le64(buf + \old(*pos) + 8) &&
              out->ne[1] == le64(buf + \old(*pos) + 16) &&
              out->ne[2] == le64(buf + \old(*pos) + 24) &&
              out->ne[3] == le64(buf + \old(*pos) + 32);
      ensures out->src[0] == le32(buf + \old(*pos) + 40) &&
              out->src[1] == le32(buf + \old(*pos) + 44) &&
              out->src[2] == le32(buf + \old(*pos) + 48) &&
              out->src[3] == le32(buf + \old(*pos) + 52) &&
              out->src[4] == le32(buf + \old(*pos) + 56) &&
              out->src[5] == le32(buf + \old(*pos) + 60);
      ensures \forall integer k; 0 <= k < arity(out->op) ==>
                out->src[k] < n_leaves + node_index;
      ensures \forall integer k; arity(out->op) <= k < BATON_MAX_SRC ==>
                out->src[k] == BATON_SRC_NONE;
      ensures out->out_leaf == le32(buf + \old(*pos) + 64);
      ensures out->out_leaf == BATON_SRC_NONE || out->out_leaf < n_leaves;
      ensures \forall integer k; 0 <= k < BATON_N_PARAMS ==>
                out->params[k] == le32(buf + \old(*pos) + 68 + 4 * k);
    complete behaviors;
    disjoint behaviors;
*/
int baton_wire_decode_node(const uint8_t *buf, size_t len, size_t *pos, uint32_t n_leaves,
                           uint32_t node_index, struct baton_graph_node *out)
{
    const uint8_t *p;
    uint32_t op;
    uint32_t type;
    uint32_t src[BATON_MAX_SRC];
    uint32_t out_leaf;
    uint64_t limit;
    uint32_t arity;
    uint32_t block_elems;
    uint32_t block_bytes;
    int i;

    if (!have(len, *pos, BATON_GRAPH_NODE_BYTES))
        return BATON_E_TRUNCATED;
    p = buf + *pos;
    op = load32(p);
    type = load32(p + 4);
    src[0] = load32(p + 40);
    src[1] = load32(p + 44);
    src[2] = load32(p + 48);
    src[3] = load32(p + 52);
    src[4] = load32(p + 56);
    src[5] = load32(p + 60);
    out_leaf = load32(p + 64);
    arity = op_arity(op);
    if (arity == 0)
        return BATON_E_GRAPH;
    limit = (uint64_t)n_leaves + node_index;
    if (!srcs_valid(arity, src, limit))
        return BATON_E_GRAPH;
    if (!leaf_ref_valid(out_leaf, n_leaves))
        return BATON_E_GRAPH;
    if (baton_type_block(type, &block_elems, &block_bytes) != 0)
        return BATON_E_TYPE;
    if (load32(p + 100) != 0)
        return BATON_E_INVAL;
    out->op = op;
    out->type = type;
    out->ne[0] = load64(p + 8);
    out->ne[1] = load64(p + 16);
    out->ne[2] = load64(p + 24);
    out->ne[3] = load64(p + 32);
    out->src[0] = src[0];
    out->src[1] = src[1];
    out->src[2] = src[2];
    out->src[3] = src[3];
    out->src[4] = src[4];
    out->src[5] = src[5];
    out->out_leaf = out_leaf;
    /*@ loop invariant 0 <= i <= BATON_N_PARAMS;
        loop invariant \forall integer k; 0 <= k < i ==>
          out->params[k] == le32(p + 68 + 4 * k);
        loop assigns i, out->params[0 .. BATON_N_PARAMS - 1];
        loop variant BATON_N_PARAMS - i;
    */
    for (i = 0; i < BATON_N_PARAMS; i++)
        out->params[i] = load32(p + 68 + 4 * i);
    *pos = *pos + BATON_GRAPH_NODE_BYTES;
    return 0;
}

/*@ requires \valid(pos) && \valid(out) && \valid_read(buf + (0 .. len - 1));
    requires \separated(pos, out, buf + (0 .. len - 1));
    assigns *pos, *out;
    behavior truncated:
      assumes !room(len, *pos, 96);
      ensures *pos == \old(*pos);
      ensures \result == BATON_E_TRUNCATED;
    behavior bad_reserved:
      assumes room(len, *pos, 96) && le64(buf + *pos + 88) != 0;
      ensures *pos == \old(*pos);
      ensures \result == BATON_E_INVAL;
    behavior ok:
      assumes room(len, *pos, 96) && le64(buf + *pos + 88) == 0;
      ensures \result == 0;
      ensures *pos == \old(*pos) + 96 && *pos <= len;
      ensures out->total_memory == le64(buf + \old(*pos));
      ensures out->free_memory == le64(buf + \old(*pos) + 8);
      ensures out->alignment == le64(buf + \old(*pos) + 16);
      ensures out->max_buffer_bytes == le64(buf + \old(*pos) + 24);
      ensures out->type_mask == le64(buf + \old(*pos) + 32);
      ensures out->op_mask == le64(buf + \old(*pos) + 40);
      ensures out->n_threads == le32(buf + \old(*pos) + 48);
      ensures out->version == le32(buf + \old(*pos) + 52);
      ensures \forall integer k; 0 <= k < 32 ==>
                out->name[k] == (buf[\old(*pos) + 56 + k] < 128 ? buf[\old(*pos) + 56 + k]
                                                                : buf[\old(*pos) + 56 + k] - 256);
      ensures out->name[32] == 0;
    complete behaviors;
    disjoint behaviors;
*/
int baton_wire_decode_device_info(const uint8_t *buf, size_t len, size_t *pos,
                                  struct baton_device_info *out)
{
    const uint8_t *p;
    uint8_t c;
    int i;

    if (!have(len, *pos, BATON_DEVICE_INFO_BYTES))
        return BATON_E_TRUNCATED;
    p = buf + *pos;
    if (load64(p + 88) != 0)
        return BATON_E_INVAL;
    /* Byte to char as two's complement, spelled out so that no conversion
     * is implementation-defined. */
    /*@ loop invariant 0 <= i <= 32;
        loop invariant \forall integer k; 0 <= k < i ==>
          out->name[k] == (p[56 + k] < 128 ? p[56 + k] : p[56 + k] - 256);
        loop assigns i, c, out->name[0 .. 31];
        loop variant 32 - i;
    */
    for (i = 0; i < 32; i++) {
        c = p[56 + i];
        out->name[i] = c < 128 ? (char)c : (char)(c - 256);
    }
    out->name[32] = 0;
    out->total_memory = load64(p);
    out->free_memory = load64(p + 8);
    out->alignment = load64(p + 16);
    out->max_buffer_bytes = load64(p + 24);
    out->type_mask = load64(p + 32);
    out->op_mask = load64(p + 40);
    out->n_threads = load32(p + 48);
    out->version = load32(p + 52);
    *pos = *pos + BATON_DEVICE_INFO_BYTES;
    return 0;
}
