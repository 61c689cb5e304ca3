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

    // Little-endian value of bytes b0 (least significant) .. bn. Over values,
    // not memory, so that no axiom quantifies over memory; the macros LE16,
    // LE32 and LE64 below apply them to the bytes at a pointer. Defining
    // axioms rather than definitions keep each value one term in goals that
    // only pass it along.
    axiomatic LittleEndian {
      logic integer le16(integer b0, integer b1);
      logic integer le32(integer b0, integer b1, integer b2, integer b3);
      logic integer le64(integer b0, integer b1, integer b2, integer b3,
                         integer b4, integer b5, integer b6, integer b7);
      axiom le16_def: \forall integer b0, b1; le16(b0, b1) == b0 + 256 * b1;
      axiom le32_def: \forall integer b0, b1, b2, b3;
        le32(b0, b1, b2, b3) == b0 + 256 * b1 + 65536 * b2 + 16777216 * b3;
      axiom le64_def: \forall integer b0, b1, b2, b3, b4, b5, b6, b7;
        le64(b0, b1, b2, b3, b4, b5, b6, b7) ==
          le32(b0, b1, b2, b3) + 4294967296 * le32(b4, b5, b6, b7);
    }

    // core/types.h: the accepted type ids and their block layouts (6, 7:
    // Q5_0, Q5_1, blocks of 32; 10..14: the K-quants Q2_K..Q6_K,
    // super-blocks of 256; 20: IQ4_NL, blocks of 32; 23: IQ4_XS,
    // super-blocks of 256; 30: BF16, 2 bytes).
    predicate known_type(integer t) =
      t == 0 || t == 1 || t == 2 || t == 6 || t == 7 || t == 8 || (10 <= t && t <= 14) ||
      t == 20 || t == 23 || t == 26 || t == 30;
    logic integer blk_elems(integer t) =
      (t == 2 || t == 6 || t == 7 || t == 8 || t == 20) ? 32 :
      ((10 <= t && t <= 14) || t == 23) ? 256 : 1;
    logic integer blk_bytes(integer t) =
      t == 0 ? 4 : (t == 1 || t == 30) ? 2 : (t == 2 || t == 20) ? 18 : t == 6 ? 22 :
      t == 7 ? 24 : t == 8 ? 34 : t == 10 ? 84 : t == 11 ? 110 :
      t == 12 ? 144 : t == 13 ? 176 : t == 14 ? 210 : t == 23 ? 136 : 4;

    // Contiguous strides (core/tensor.h): nb[0] = block bytes, nb[1] = nb[0] *
    // ne[0] / block_elems, nb[i] = nb[i-1] * ne[i-1]; extent = nb[3] * ne[3].
    // Defining axioms rather than definitions keep these products as single
    // terms in goals that only pass them along (no nonlinear arithmetic).
    axiomatic Strides {
      logic integer stride1(integer t, integer n0);
      logic integer stride2(integer t, integer n0, integer n1);
      logic integer stride3(integer t, integer n0, integer n1, integer n2);
      logic integer extent(integer t, integer n0, integer n1, integer n2, integer n3);
      axiom stride1_def: \forall integer t, n0;
        stride1(t, n0) == blk_bytes(t) * (n0 / blk_elems(t));
      axiom stride2_def: \forall integer t, n0, n1;
        stride2(t, n0, n1) == stride1(t, n0) * n1;
      axiom stride3_def: \forall integer t, n0, n1, n2;
        stride3(t, n0, n1, n2) == stride2(t, n0, n1) * n2;
      axiom extent_def: \forall integer t, n0, n1, n2, n3;
        extent(t, n0, n1, n2, n3) == stride3(t, n0, n1, n2) * n3;
    }

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

    // With contiguous strides the extent is nb[3] * ne[3] (wire.h).
    lemma extent_nb3: \forall integer t, n0, n1, n2, n3, b0, b1, b2, b3;
      strides_eq(t, n0, n1, n2, b0, b1, b2, b3) ==> extent(t, n0, n1, n2, n3) == b3 * n3;

    // The status of baton_wire_tensor_extent, checks in protocol order (the
    // conditions spell out known_type, dims_ok, strides_fit, strides_eq).
    axiomatic ExtentStatus {
      logic integer extent_rc(integer t, integer n0, integer n1, integer n2, integer n3,
                              integer b0, integer b1, integer b2, integer b3);
      axiom extent_rc_def: \forall integer t, n0, n1, n2, n3, b0, b1, b2, b3;
        extent_rc(t, n0, n1, n2, n3, b0, b1, b2, b3) ==
        (!(t == 0 || t == 1 || t == 2 || t == 6 || t == 7 || t == 8 || (10 <= t && t <= 14) ||
           t == 20 || t == 23 || t == 26 || t == 30) ?
           BATON_E_TYPE :
         !(n0 <= BATON_MAX_DIM_ELEMS && n1 <= BATON_MAX_DIM_ELEMS &&
           n2 <= BATON_MAX_DIM_ELEMS && n3 <= BATON_MAX_DIM_ELEMS) ? BATON_E_LIMIT :
         n0 % blk_elems(t) != 0 ? BATON_E_SHAPE :
         !(stride1(t, n0) <= UINT64_MAX && stride2(t, n0, n1) <= UINT64_MAX &&
           stride3(t, n0, n1, n2) <= UINT64_MAX) ? BATON_E_OVERFLOW :
         !(b0 == blk_bytes(t) && b1 == stride1(t, n0) && b2 == stride2(t, n0, n1) &&
           b3 == stride3(t, n0, n1, n2)) ? BATON_E_SHAPE :
         extent(t, n0, n1, n2, n3) > UINT64_MAX ? BATON_E_OVERFLOW : 0);
    }

    // core/ops.c: number of sources per op id, 0 for an unknown id. Given
    // by axioms (one per id) so that goals keep arity(op) as one term.
    axiomatic Arity {
      logic integer arity(integer op);
      axiom arity_unary: \forall integer op;
        op == BATON_OP_RMS_NORM || op == BATON_OP_SCALE || op == BATON_OP_SILU ||
        op == BATON_OP_ARGMAX || op == BATON_OP_RESHAPE || op == BATON_OP_GELU ==>
          arity(op) == 1;
      axiom arity_binary: \forall integer op;
        op == BATON_OP_GET_ROWS || op == BATON_OP_MUL_MAT || op == BATON_OP_ADD ||
        op == BATON_OP_MUL || op == BATON_OP_ROPE || op == BATON_OP_SAMPLE ==> arity(op) == 2;
      axiom arity_rope_freqs: arity(BATON_OP_ROPE_FREQS) == 3;
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
 * little-endian value at byte pointer P, and the checks of a tensor
 * descriptor or graph node applied to the fields read at P. Macros rather
 * than logic functions over P, so that each goal names the very field terms
 * the code produced. */
#define LE16(P) le16((P)[0], (P)[1])
#define LE32(P) le32((P)[0], (P)[1], (P)[2], (P)[3])
#define LE64(P) le64((P)[0], (P)[1], (P)[2], (P)[3], (P)[4], (P)[5], (P)[6], (P)[7])
#define DESC_RC(P)                                                                   \
    extent_rc(LE32((P) + 16), LE64((P) + 24), LE64((P) + 32), LE64((P) + 40),        \
              LE64((P) + 48), LE64((P) + 56), LE64((P) + 64), LE64((P) + 72),        \
              LE64((P) + 80))
#define DESC_EXTENT(P)                                                               \
    extent(LE32((P) + 16), LE64((P) + 24), LE64((P) + 32), LE64((P) + 40), LE64((P) + 48))
#define SRCS_OK(P, LIMIT)                                                            \
    srcs_ok(arity(LE32(P)), LE32((P) + 40), LE32((P) + 44), LE32((P) + 48),          \
            LE32((P) + 52), LE32((P) + 56), LE32((P) + 60), (LIMIT))

/*@ requires \valid_read(p + (0 .. 1));
    assigns \nothing;
    ensures \result == LE16(p);
*/
static uint16_t load16(const uint8_t *p)
{
    return (uint16_t)((uint32_t)p[0] + 256u * p[1]);
}

/*@ requires \valid_read(p + (0 .. 3));
    assigns \nothing;
    ensures \result == LE32(p);
*/
static uint32_t load32(const uint8_t *p)
{
    return (uint32_t)p[0] + 256u * p[1] + 65536u * p[2] + 16777216u * p[3];
}

/*@ requires \valid_read(p + (0 .. 7));
    assigns \nothing;
    ensures \result == LE64(p);
*/
static uint64_t load64(const uint8_t *p)
{
    uint64_t lo = load32(p);
    uint64_t hi = load32(p + 4);
    //@ assert lo + 4294967296 * hi <= UINT64_MAX;
    return lo + 4294967296u * hi;
}

/*@ requires \valid(dst + (0 .. n - 1)) && \valid_read(src + (0 .. n - 1));
    requires \separated(dst + (0 .. n - 1), src + (0 .. n - 1));
    assigns dst[0 .. n - 1];
    ensures \forall integer k; 0 <= k < n ==> dst[k] == src[k];
*/
static void copy_bytes(uint8_t *dst, const uint8_t *src, size_t n)
{
    size_t i;

    /*@ loop invariant 0 <= i <= n;
        loop invariant \forall integer k; 0 <= k < i ==> dst[k] == src[k];
        loop assigns i, dst[0 .. n - 1];
        loop variant n - i;
    */
    for (i = 0; i < n; i++)
        dst[i] = src[i];
}

/*@ requires n <= 64;
    requires \valid(dst + (0 .. n - 1)) && \valid_read(src + (0 .. 4 * n - 1));
    assigns dst[0 .. n - 1];
    ensures \forall integer k; 0 <= k < n ==> dst[k] == LE32(src + 4 * k);
*/
static void load_words(uint32_t *dst, const uint8_t *src, size_t n)
{
    size_t i;

    /*@ loop invariant 0 <= i <= n;
        loop invariant \forall integer k; 0 <= k < i ==> dst[k] == LE32(src + 4 * k);
        loop assigns i, dst[0 .. n - 1];
        loop variant n - i;
    */
    for (i = 0; i < n; i++)
        dst[i] = load32(src + 4 * i);
}

/* Byte to char as two's complement, spelled out so that no conversion is
 * implementation-defined; name[32] is the terminating NUL. */
/*@ requires \valid(name + (0 .. 32)) && \valid_read(src + (0 .. 31));
    assigns name[0 .. 32];
    ensures \forall integer k; 0 <= k < 32 ==>
              name[k] == (src[k] < 128 ? src[k] : src[k] - 256);
    ensures name[32] == 0;
*/
static void load_name(char *name, const uint8_t *src)
{
    int i;

    /*@ loop invariant 0 <= i <= 32;
        loop invariant \forall integer k; 0 <= k < i ==>
          name[k] == (src[k] < 128 ? src[k] : src[k] - 256);
        loop assigns i, name[0 .. 31];
        loop variant 32 - i;
    */
    for (i = 0; i < 32; i++)
        name[i] = src[i] < 128 ? (char)src[i] : (char)(src[i] - 256);
    name[32] = 0;
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
      ensures *out == LE16(buf + \old(*pos));
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
      ensures *out == LE32(buf + \old(*pos));
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
      ensures *out == LE64(buf + \old(*pos));
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
      assumes buf[*pos + 5] != 0 || LE32(buf + *pos + 12) != 0;
      ensures *pos == \old(*pos);
      ensures \result == BATON_E_INVAL;
    behavior too_long:
      assumes room(len, *pos, 24);
      assumes buf[*pos] == 0x42 && buf[*pos + 1] == 0x41 && buf[*pos + 2] == 0x54 &&
              buf[*pos + 3] == 0x4E;
      assumes 0 < buf[*pos + 4] < BATON_CMD_LIMIT;
      assumes buf[*pos + 5] == 0 && LE32(buf + *pos + 12) == 0;
      assumes LE64(buf + *pos + 16) > max_len;
      ensures *pos == \old(*pos);
      ensures \result == BATON_E_LIMIT;
    behavior ok:
      assumes room(len, *pos, 24);
      assumes buf[*pos] == 0x42 && buf[*pos + 1] == 0x41 && buf[*pos + 2] == 0x54 &&
              buf[*pos + 3] == 0x4E;
      assumes 0 < buf[*pos + 4] < BATON_CMD_LIMIT;
      assumes buf[*pos + 5] == 0 && LE32(buf + *pos + 12) == 0;
      assumes LE64(buf + *pos + 16) <= max_len;
      ensures \result == 0;
      ensures *pos == \old(*pos) + 24 && *pos <= len;
      ensures 0 < out->cmd < BATON_CMD_LIMIT && out->flags == 0;
      ensures out->cmd == \at(buf[*pos + 4], Pre);
      ensures out->status == \at(LE16(buf + *pos + 6), Pre);
      ensures out->seq == \at(LE32(buf + *pos + 8), Pre);
      ensures out->len == \at(LE64(buf + *pos + 16), Pre) && out->len <= max_len;
    complete behaviors;
    disjoint behaviors;
*/
int baton_wire_decode_header(const uint8_t *buf, size_t len, size_t *pos, uint64_t max_len,
                             struct baton_frame_header *out)
{
    size_t at = *pos;
    const uint8_t *p;
    struct baton_frame_header h;

    if (!have(len, at, BATON_FRAME_HEADER_BYTES))
        return BATON_E_TRUNCATED;
    p = buf + at;
    if (p[0] != 0x42 || p[1] != 0x41 || p[2] != 0x54 || p[3] != 0x4E)
        return BATON_E_MAGIC;
    if (p[4] == 0 || p[4] >= BATON_CMD_LIMIT)
        return BATON_E_CMD;
    if (p[5] != 0 || load32(p + 12) != 0)
        return BATON_E_INVAL;
    h.len = load64(p + 16);
    if (h.len > max_len)
        return BATON_E_LIMIT;
    h.cmd = p[4];
    h.flags = p[5];
    h.status = load16(p + 6);
    h.seq = load32(p + 8);
    *pos = at + BATON_FRAME_HEADER_BYTES;
    *out = h;
    return 0;
}

/*@ requires \valid(out) && \valid_read(h) && \separated(out, h);
    assigns *out;
    ensures out->version_min == h->version_min && out->version_max == h->version_max;
    ensures out->role == h->role && out->features == h->features;
    ensures \forall integer k; 0 <= k < 32 ==> out->nonce[k] == h->nonce[k];
*/
static void store_hello(struct baton_hello *out, const struct baton_hello *h)
{
    out->version_min = h->version_min;
    out->version_max = h->version_max;
    out->role = h->role;
    out->features = h->features;
    copy_bytes(out->nonce, h->nonce, 32);
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
              LE16(buf + *pos) > LE16(buf + *pos + 2) || buf[*pos + 4] > BATON_ROLE_PEER;
      ensures *pos == \old(*pos);
      ensures \result == BATON_E_INVAL;
    behavior ok:
      assumes room(len, *pos, 48);
      assumes buf[*pos + 5] == 0 && buf[*pos + 6] == 0 && buf[*pos + 7] == 0 &&
              LE16(buf + *pos) <= LE16(buf + *pos + 2) && buf[*pos + 4] <= BATON_ROLE_PEER;
      ensures \result == 0;
      ensures *pos == \old(*pos) + 48 && *pos <= len;
      ensures out->version_min == \at(LE16(buf + *pos), Pre);
      ensures out->version_max == \at(LE16(buf + *pos + 2), Pre);
      ensures out->version_min <= out->version_max;
      ensures out->role == \at(buf[*pos + 4], Pre) && out->role <= BATON_ROLE_PEER;
      ensures out->features == \at(LE64(buf + *pos + 8), Pre);
      ensures \forall integer k; 0 <= k < 32 ==>
                out->nonce[k] == \at((buf + *pos + 16)[k], Pre);
    complete behaviors;
    disjoint behaviors;
*/
int baton_wire_decode_hello(const uint8_t *buf, size_t len, size_t *pos, struct baton_hello *out)
{
    size_t at = *pos;
    const uint8_t *p;
    struct baton_hello h;

    if (!have(len, at, BATON_HELLO_BYTES))
        return BATON_E_TRUNCATED;
    p = buf + at;
    if (p[5] != 0 || p[6] != 0 || p[7] != 0)
        return BATON_E_INVAL;
    h.version_min = load16(p);
    h.version_max = load16(p + 2);
    h.role = p[4];
    if (h.version_min > h.version_max || h.role > BATON_ROLE_PEER)
        return BATON_E_INVAL;
    h.features = load64(p + 8);
    copy_bytes(h.nonce, p + 16, 32);
    *pos = at + BATON_HELLO_BYTES;
    store_hello(out, &h);
    return 0;
}

/*@ requires \valid_read(ne + (0 .. 3)) && \valid(nb + (0 .. 3));
    requires \separated(ne + (0 .. 3), nb + (0 .. 3));
    assigns nb[0 .. 3];
    behavior bad_type:
      assumes !known_type(type);
      ensures nb[0] == \old(nb[0]) && nb[1] == \old(nb[1]) &&
              nb[2] == \old(nb[2]) && nb[3] == \old(nb[3]);
      ensures \result == BATON_E_TYPE;
    behavior bad_block:
      assumes known_type(type) && ne[0] % blk_elems(type) != 0;
      ensures nb[0] == \old(nb[0]) && nb[1] == \old(nb[1]) &&
              nb[2] == \old(nb[2]) && nb[3] == \old(nb[3]);
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
    ensures \result == 0 ==>
              known_type(type) && *nbytes == extent(type, ne[0], ne[1], ne[2], ne[3]);
    behavior bad_type:
      assumes !known_type(type);
      ensures *nbytes == \old(*nbytes);
      ensures \result == BATON_E_TYPE;
    behavior too_large:
      assumes known_type(type) && !dims_ok(ne[0], ne[1], ne[2], ne[3]);
      ensures *nbytes == \old(*nbytes);
      ensures \result == BATON_E_LIMIT;
    behavior bad_block:
      assumes known_type(type) && dims_ok(ne[0], ne[1], ne[2], ne[3]);
      assumes ne[0] % blk_elems(type) != 0;
      ensures *nbytes == \old(*nbytes);
      ensures \result == BATON_E_SHAPE;
    behavior stride_wraps:
      assumes known_type(type) && dims_ok(ne[0], ne[1], ne[2], ne[3]);
      assumes ne[0] % blk_elems(type) == 0;
      assumes !strides_fit(type, ne[0], ne[1], ne[2]);
      ensures *nbytes == \old(*nbytes);
      ensures \result == BATON_E_OVERFLOW;
    behavior bad_stride:
      assumes known_type(type) && dims_ok(ne[0], ne[1], ne[2], ne[3]);
      assumes ne[0] % blk_elems(type) == 0 && strides_fit(type, ne[0], ne[1], ne[2]);
      assumes !strides_eq(type, ne[0], ne[1], ne[2], nb[0], nb[1], nb[2], nb[3]);
      ensures *nbytes == \old(*nbytes);
      ensures \result == BATON_E_SHAPE;
    behavior extent_wraps:
      assumes known_type(type) && dims_ok(ne[0], ne[1], ne[2], ne[3]);
      assumes ne[0] % blk_elems(type) == 0 && strides_fit(type, ne[0], ne[1], ne[2]);
      assumes strides_eq(type, ne[0], ne[1], ne[2], nb[0], nb[1], nb[2], nb[3]);
      assumes extent(type, ne[0], ne[1], ne[2], ne[3]) > UINT64_MAX;
      ensures *nbytes == \old(*nbytes);
      ensures \result == BATON_E_OVERFLOW;
    behavior ok:
      assumes known_type(type) && dims_ok(ne[0], ne[1], ne[2], ne[3]);
      assumes ne[0] % blk_elems(type) == 0 && strides_fit(type, ne[0], ne[1], ne[2]);
      assumes strides_eq(type, ne[0], ne[1], ne[2], nb[0], nb[1], nb[2], nb[3]);
      assumes extent(type, ne[0], ne[1], ne[2], ne[3]) <= UINT64_MAX;
      ensures \result == 0;
      ensures *nbytes == extent(type, ne[0], ne[1], ne[2], ne[3]);
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

/*@ requires \valid_read(p + (0 .. BATON_TENSOR_DESC_BYTES - 1)) && \valid(t);
    requires \separated(p + (0 .. BATON_TENSOR_DESC_BYTES - 1), t);
    assigns t->buffer, t->offset, t->type, t->ne[0 .. 3], t->nb[0 .. 3];
    ensures t->buffer == LE64(p) && t->offset == LE64(p + 8) && t->type == LE32(p + 16);
    ensures t->ne[0] == LE64(p + 24) && t->ne[1] == LE64(p + 32) &&
            t->ne[2] == LE64(p + 40) && t->ne[3] == LE64(p + 48);
    ensures t->nb[0] == LE64(p + 56) && t->nb[1] == LE64(p + 64) &&
            t->nb[2] == LE64(p + 72) && t->nb[3] == LE64(p + 80);
*/
static void read_desc(const uint8_t *p, struct baton_tensor_desc *t)
{
    t->buffer = load64(p);
    t->offset = load64(p + 8);
    t->type = load32(p + 16);
    t->ne[0] = load64(p + 24);
    t->ne[1] = load64(p + 32);
    t->ne[2] = load64(p + 40);
    t->ne[3] = load64(p + 48);
    t->nb[0] = load64(p + 56);
    t->nb[1] = load64(p + 64);
    t->nb[2] = load64(p + 72);
    t->nb[3] = load64(p + 80);
}

/*@ requires \valid(out) && \valid_read(t) && \separated(out, t);
    assigns *out;
    ensures out->buffer == t->buffer && out->offset == t->offset && out->type == t->type;
    ensures out->ne[0] == t->ne[0] && out->ne[1] == t->ne[1] &&
            out->ne[2] == t->ne[2] && out->ne[3] == t->ne[3];
    ensures out->nb[0] == t->nb[0] && out->nb[1] == t->nb[1] &&
            out->nb[2] == t->nb[2] && out->nb[3] == t->nb[3];
    ensures out->nbytes == t->nbytes;
*/
static void store_tensor(struct baton_tensor_desc *out, const struct baton_tensor_desc *t)
{
    out->buffer = t->buffer;
    out->offset = t->offset;
    out->type = t->type;
    out->ne[0] = t->ne[0];
    out->ne[1] = t->ne[1];
    out->ne[2] = t->ne[2];
    out->ne[3] = t->ne[3];
    out->nb[0] = t->nb[0];
    out->nb[1] = t->nb[1];
    out->nb[2] = t->nb[2];
    out->nb[3] = t->nb[3];
    out->nbytes = t->nbytes;
}

/*@ requires \valid(pos) && \valid(out) && \valid_read(buf + (0 .. len - 1));
    requires \separated(pos, out, buf + (0 .. len - 1));
    assigns *pos, *out;
    behavior truncated:
      assumes !room(len, *pos, 88);
      ensures *pos == \old(*pos);
      ensures \result == BATON_E_TRUNCATED;
    behavior bad_reserved:
      assumes room(len, *pos, 88) && LE32(buf + *pos + 20) != 0;
      ensures *pos == \old(*pos);
      ensures \result == BATON_E_INVAL;
    behavior bad_extent:
      assumes room(len, *pos, 88) && LE32(buf + *pos + 20) == 0;
      assumes DESC_RC(buf + *pos) != 0;
      ensures *pos == \old(*pos);
      ensures \result == DESC_RC(buf + \old(*pos)) && \result < 0;
    behavior end_wraps:
      assumes room(len, *pos, 88) && LE32(buf + *pos + 20) == 0;
      assumes DESC_RC(buf + *pos) == 0;
      assumes LE64(buf + *pos + 8) + DESC_EXTENT(buf + *pos) > UINT64_MAX;
      ensures *pos == \old(*pos);
      ensures \result == BATON_E_OVERFLOW;
    behavior ok:
      assumes room(len, *pos, 88) && LE32(buf + *pos + 20) == 0;
      assumes DESC_RC(buf + *pos) == 0;
      assumes LE64(buf + *pos + 8) + DESC_EXTENT(buf + *pos) <= UINT64_MAX;
      ensures \result == 0;
      ensures *pos == \old(*pos) + 88 && *pos <= len;
      ensures out->buffer == LE64(buf + \old(*pos));
      ensures out->offset == LE64(buf + \old(*pos) + 8);
      ensures out->type == LE32(buf + \old(*pos) + 16) && known_type(out->type);
      ensures out->ne[0] == LE64(buf + \old(*pos) + 24) &&
              out->ne[1] == LE64(buf + \old(*pos) + 32) &&
              out->ne[2] == LE64(buf + \old(*pos) + 40) &&
              out->ne[3] == LE64(buf + \old(*pos) + 48);
      ensures out->nb[0] == LE64(buf + \old(*pos) + 56) &&
              out->nb[1] == LE64(buf + \old(*pos) + 64) &&
              out->nb[2] == LE64(buf + \old(*pos) + 72) &&
              out->nb[3] == LE64(buf + \old(*pos) + 80);
      ensures out->nbytes == DESC_EXTENT(buf + \old(*pos));
      ensures LE64(buf + \old(*pos) + 8) + out->nbytes <= UINT64_MAX;
    complete behaviors;
    disjoint behaviors;
*/
int baton_wire_decode_tensor(const uint8_t *buf, size_t len, size_t *pos,
                             struct baton_tensor_desc *out)
{
    const uint8_t *p;
    size_t at = *pos;
    struct baton_tensor_desc t;
    int rc;

    if (!have(len, at, BATON_TENSOR_DESC_BYTES))
        return BATON_E_TRUNCATED;
    p = buf + at;
    if (load32(p + 20) != 0)
        return BATON_E_INVAL;
    read_desc(p, &t);
    rc = baton_wire_tensor_extent(t.type, t.ne, t.nb, &t.nbytes);
    if (rc != 0)
        return rc;
    if (t.nbytes > UINT64_MAX - t.offset)
        return BATON_E_OVERFLOW;
    *pos = at + BATON_TENSOR_DESC_BYTES;
    store_tensor(out, &t);
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
      assumes LE32(buf + *pos) > BATON_MAX_GRAPH_LEAVES ||
              LE32(buf + *pos + 4) > BATON_MAX_GRAPH_NODES || LE32(buf + *pos + 4) > max_nodes;
      ensures *pos == \old(*pos);
      ensures \result == BATON_E_LIMIT;
    behavior no_nodes:
      assumes room(len, *pos, 8);
      assumes LE32(buf + *pos) <= BATON_MAX_GRAPH_LEAVES && LE32(buf + *pos + 4) == 0;
      ensures *pos == \old(*pos);
      ensures \result == BATON_E_INVAL;
    behavior bad_length:
      assumes room(len, *pos, 8);
      assumes LE32(buf + *pos) <= BATON_MAX_GRAPH_LEAVES;
      assumes 0 < LE32(buf + *pos + 4) <= BATON_MAX_GRAPH_NODES &&
              LE32(buf + *pos + 4) <= max_nodes;
      assumes *pos + 8 + 88 * LE32(buf + *pos) + 104 * LE32(buf + *pos + 4) != len;
      ensures *pos == \old(*pos);
      ensures \result == BATON_E_INVAL;
    behavior ok:
      assumes room(len, *pos, 8);
      assumes LE32(buf + *pos) <= BATON_MAX_GRAPH_LEAVES;
      assumes 0 < LE32(buf + *pos + 4) <= BATON_MAX_GRAPH_NODES &&
              LE32(buf + *pos + 4) <= max_nodes;
      assumes *pos + 8 + 88 * LE32(buf + *pos) + 104 * LE32(buf + *pos + 4) == len;
      ensures \result == 0;
      ensures *pos == \old(*pos) + 8;
      ensures *n_leaves == LE32(buf + \old(*pos)) && *n_leaves <= BATON_MAX_GRAPH_LEAVES;
      ensures *n_nodes == LE32(buf + \old(*pos) + 4);
      ensures 0 < *n_nodes <= BATON_MAX_GRAPH_NODES && *n_nodes <= max_nodes;
      ensures *pos + 88 * *n_leaves + 104 * *n_nodes == len;
    complete behaviors;
    disjoint behaviors;
*/
int baton_wire_decode_graph_header(const uint8_t *buf, size_t len, size_t *pos,
                                   uint32_t max_nodes, uint32_t *n_leaves, uint32_t *n_nodes)
{
    size_t at = *pos;
    const uint8_t *p;
    uint32_t leaves;
    uint32_t nodes;
    uint64_t need;

    if (!have(len, at, BATON_GRAPH_HEADER_BYTES))
        return BATON_E_TRUNCATED;
    p = buf + at;
    leaves = load32(p);
    nodes = load32(p + 4);
    if (leaves > BATON_MAX_GRAPH_LEAVES || nodes > BATON_MAX_GRAPH_NODES || nodes > max_nodes)
        return BATON_E_LIMIT;
    if (nodes == 0)
        return BATON_E_INVAL;
    //@ assert 88 * leaves + 104 * nodes <= UINT64_MAX;
    need = (uint64_t)leaves * BATON_TENSOR_DESC_BYTES + (uint64_t)nodes * BATON_GRAPH_NODE_BYTES;
    if (len - at - BATON_GRAPH_HEADER_BYTES != need)
        return BATON_E_INVAL;
    *pos = at + BATON_GRAPH_HEADER_BYTES;
    *n_leaves = leaves;
    *n_nodes = nodes;
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
    case BATON_OP_GELU:
    case BATON_OP_ARGMAX:
    case BATON_OP_RESHAPE:
        return 1;
    case BATON_OP_GET_ROWS:
    case BATON_OP_MUL_MAT:
    case BATON_OP_ADD:
    case BATON_OP_MUL:
    case BATON_OP_ROPE:
    case BATON_OP_SAMPLE:
        return 2;
    case BATON_OP_ROPE_FREQS:
        return 3;
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

/* Whether a node's type id is in the table. A helper with a one-line
 * contract, so that decode_node's goals carry known_type(type) and not the
 * per-type behaviors of baton_type_block (with ten types its goals about the
 * sources timed out). */
/*@ assigns \nothing;
    ensures known_type(type) ==> \result == 1;
    ensures !known_type(type) ==> \result == 0;
*/
static int type_known(uint32_t type)
{
    uint32_t block_elems;
    uint32_t block_bytes;

    return baton_type_block(type, &block_elems, &block_bytes) == 0;
}

/*@ requires \valid_read(p + (0 .. BATON_GRAPH_NODE_BYTES - 1)) && \valid(n);
    requires \separated(p + (0 .. BATON_GRAPH_NODE_BYTES - 1), n);
    assigns *n;
    ensures n->op == LE32(p) && n->type == LE32(p + 4);
    ensures n->ne[0] == LE64(p + 8) && n->ne[1] == LE64(p + 16) &&
            n->ne[2] == LE64(p + 24) && n->ne[3] == LE64(p + 32);
    ensures n->src[0] == LE32(p + 40) && n->src[1] == LE32(p + 44) &&
            n->src[2] == LE32(p + 48) && n->src[3] == LE32(p + 52) &&
            n->src[4] == LE32(p + 56) && n->src[5] == LE32(p + 60);
    ensures n->out_leaf == LE32(p + 64);
    ensures \forall integer k; 0 <= k < BATON_N_PARAMS ==> n->params[k] == LE32((p + 68) + 4 * k);
*/
static void read_node(const uint8_t *p, struct baton_graph_node *n)
{
    n->op = load32(p);
    n->type = load32(p + 4);
    n->ne[0] = load64(p + 8);
    n->ne[1] = load64(p + 16);
    n->ne[2] = load64(p + 24);
    n->ne[3] = load64(p + 32);
    n->src[0] = load32(p + 40);
    n->src[1] = load32(p + 44);
    n->src[2] = load32(p + 48);
    n->src[3] = load32(p + 52);
    n->src[4] = load32(p + 56);
    n->src[5] = load32(p + 60);
    n->out_leaf = load32(p + 64);
    load_words(n->params, p + 68, BATON_N_PARAMS);
}

/*@ requires \valid(out) && \valid_read(n) && \separated(out, n);
    assigns *out;
    ensures out->op == n->op && out->type == n->type && out->out_leaf == n->out_leaf;
    ensures out->ne[0] == n->ne[0] && out->ne[1] == n->ne[1] &&
            out->ne[2] == n->ne[2] && out->ne[3] == n->ne[3];
    ensures out->src[0] == n->src[0] && out->src[1] == n->src[1] &&
            out->src[2] == n->src[2] && out->src[3] == n->src[3] &&
            out->src[4] == n->src[4] && out->src[5] == n->src[5];
    ensures \forall integer k; 0 <= k < BATON_N_PARAMS ==> out->params[k] == n->params[k];
*/
static void store_node(struct baton_graph_node *out, const struct baton_graph_node *n)
{
    int i;

    out->op = n->op;
    out->type = n->type;
    out->ne[0] = n->ne[0];
    out->ne[1] = n->ne[1];
    out->ne[2] = n->ne[2];
    out->ne[3] = n->ne[3];
    out->src[0] = n->src[0];
    out->src[1] = n->src[1];
    out->src[2] = n->src[2];
    out->src[3] = n->src[3];
    out->src[4] = n->src[4];
    out->src[5] = n->src[5];
    out->out_leaf = n->out_leaf;
    /*@ loop invariant 0 <= i <= BATON_N_PARAMS;
        loop invariant \forall integer k; 0 <= k < i ==> out->params[k] == n->params[k];
        loop assigns i, out->params[0 .. BATON_N_PARAMS - 1];
        loop variant BATON_N_PARAMS - i;
    */
    for (i = 0; i < BATON_N_PARAMS; i++)
        out->params[i] = n->params[i];
}

/*@ requires \valid(pos) && \valid(out) && \valid_read(buf + (0 .. len - 1));
    requires \separated(pos, out, buf + (0 .. len - 1));
    assigns *pos, *out;
    behavior truncated:
      assumes !room(len, *pos, 104);
      ensures *pos == \old(*pos);
      ensures \result == BATON_E_TRUNCATED;
    behavior bad_op:
      assumes room(len, *pos, 104) && arity(LE32(buf + *pos)) == 0;
      ensures *pos == \old(*pos);
      ensures \result == BATON_E_GRAPH;
    behavior bad_src:
      assumes room(len, *pos, 104) && arity(LE32(buf + *pos)) != 0;
      assumes !SRCS_OK(buf + *pos, n_leaves + node_index);
      ensures *pos == \old(*pos);
      ensures \result == BATON_E_GRAPH;
    behavior bad_out_leaf:
      assumes room(len, *pos, 104) && arity(LE32(buf + *pos)) != 0;
      assumes SRCS_OK(buf + *pos, n_leaves + node_index);
      assumes !out_leaf_ok(LE32(buf + *pos + 64), n_leaves);
      ensures *pos == \old(*pos);
      ensures \result == BATON_E_GRAPH;
    behavior bad_type:
      assumes room(len, *pos, 104) && arity(LE32(buf + *pos)) != 0;
      assumes SRCS_OK(buf + *pos, n_leaves + node_index);
      assumes out_leaf_ok(LE32(buf + *pos + 64), n_leaves);
      assumes !known_type(LE32(buf + *pos + 4));
      ensures *pos == \old(*pos);
      ensures \result == BATON_E_TYPE;
    behavior bad_reserved:
      assumes room(len, *pos, 104) && arity(LE32(buf + *pos)) != 0;
      assumes SRCS_OK(buf + *pos, n_leaves + node_index);
      assumes out_leaf_ok(LE32(buf + *pos + 64), n_leaves);
      assumes known_type(LE32(buf + *pos + 4));
      assumes LE32(buf + *pos + 100) != 0;
      ensures *pos == \old(*pos);
      ensures \result == BATON_E_INVAL;
    behavior ok:
      assumes room(len, *pos, 104) && arity(LE32(buf + *pos)) != 0;
      assumes SRCS_OK(buf + *pos, n_leaves + node_index);
      assumes out_leaf_ok(LE32(buf + *pos + 64), n_leaves);
      assumes known_type(LE32(buf + *pos + 4));
      assumes LE32(buf + *pos + 100) == 0;
      ensures \result == 0;
      ensures *pos == \old(*pos) + 104 && *pos <= len;
      ensures out->op == LE32(buf + \old(*pos)) && arity(out->op) != 0;
      ensures out->type == LE32(buf + \old(*pos) + 4) && known_type(out->type);
      ensures out->ne[0] == LE64(buf + \old(*pos) + 8) &&
              out->ne[1] == LE64(buf + \old(*pos) + 16) &&
              out->ne[2] == LE64(buf + \old(*pos) + 24) &&
              out->ne[3] == LE64(buf + \old(*pos) + 32);
      ensures out->src[0] == LE32(buf + \old(*pos) + 40) &&
              out->src[1] == LE32(buf + \old(*pos) + 44) &&
              out->src[2] == LE32(buf + \old(*pos) + 48) &&
              out->src[3] == LE32(buf + \old(*pos) + 52) &&
              out->src[4] == LE32(buf + \old(*pos) + 56) &&
              out->src[5] == LE32(buf + \old(*pos) + 60);
      // each used source names a leaf or an earlier node; unused ones are NONE
      ensures srcs_ok(arity(out->op), out->src[0], out->src[1], out->src[2], out->src[3],
                      out->src[4], out->src[5], n_leaves + node_index);
      ensures out->out_leaf == LE32(buf + \old(*pos) + 64);
      ensures out_leaf_ok(out->out_leaf, n_leaves);
      ensures \forall integer k; 0 <= k < BATON_N_PARAMS ==>
                out->params[k] == \at(LE32((buf + *pos + 68) + 4 * k), Pre);
    complete behaviors;
    disjoint behaviors;
*/
int baton_wire_decode_node(const uint8_t *buf, size_t len, size_t *pos, uint32_t n_leaves,
                           uint32_t node_index, struct baton_graph_node *out)
{
    size_t at = *pos;
    const uint8_t *p;
    struct baton_graph_node n;
    uint32_t arity;

    if (!have(len, at, BATON_GRAPH_NODE_BYTES))
        return BATON_E_TRUNCATED;
    p = buf + at;
    read_node(p, &n);
    arity = op_arity(n.op);
    if (arity == 0)
        return BATON_E_GRAPH;
    if (!srcs_valid(arity, n.src, (uint64_t)n_leaves + node_index))
        return BATON_E_GRAPH;
    if (!leaf_ref_valid(n.out_leaf, n_leaves))
        return BATON_E_GRAPH;
    if (!type_known(n.type))
        return BATON_E_TYPE;
    if (load32(p + 100) != 0)
        return BATON_E_INVAL;
    *pos = at + BATON_GRAPH_NODE_BYTES;
    store_node(out, &n);
    return 0;
}

/*@ requires \valid_read(p + (0 .. BATON_DEVICE_INFO_BYTES - 1)) && \valid(d);
    requires \separated(p + (0 .. BATON_DEVICE_INFO_BYTES - 1), d);
    assigns *d;
    ensures d->total_memory == LE64(p) && d->free_memory == LE64(p + 8);
    ensures d->alignment == LE64(p + 16) && d->max_buffer_bytes == LE64(p + 24);
    ensures d->type_mask == LE64(p + 32) && d->op_mask == LE64(p + 40);
    ensures d->n_threads == LE32(p + 48) && d->version == LE32(p + 52);
    ensures \forall integer k; 0 <= k < 32 ==>
              d->name[k] == ((p + 56)[k] < 128 ? (p + 56)[k] : (p + 56)[k] - 256);
    ensures d->name[32] == 0;
*/
static void read_device_info(const uint8_t *p, struct baton_device_info *d)
{
    d->total_memory = load64(p);
    d->free_memory = load64(p + 8);
    d->alignment = load64(p + 16);
    d->max_buffer_bytes = load64(p + 24);
    d->type_mask = load64(p + 32);
    d->op_mask = load64(p + 40);
    d->n_threads = load32(p + 48);
    d->version = load32(p + 52);
    load_name(d->name, p + 56);
}

/*@ requires \valid(out) && \valid_read(d) && \separated(out, d);
    assigns *out;
    ensures out->total_memory == d->total_memory && out->free_memory == d->free_memory;
    ensures out->alignment == d->alignment && out->max_buffer_bytes == d->max_buffer_bytes;
    ensures out->type_mask == d->type_mask && out->op_mask == d->op_mask;
    ensures out->n_threads == d->n_threads && out->version == d->version;
    ensures \forall integer k; 0 <= k <= 32 ==> out->name[k] == d->name[k];
*/
static void store_device_info(struct baton_device_info *out, const struct baton_device_info *d)
{
    int i;

    out->total_memory = d->total_memory;
    out->free_memory = d->free_memory;
    out->alignment = d->alignment;
    out->max_buffer_bytes = d->max_buffer_bytes;
    out->type_mask = d->type_mask;
    out->op_mask = d->op_mask;
    out->n_threads = d->n_threads;
    out->version = d->version;
    /*@ loop invariant 0 <= i <= 33;
        loop invariant \forall integer k; 0 <= k < i ==> out->name[k] == d->name[k];
        loop assigns i, out->name[0 .. 32];
        loop variant 33 - i;
    */
    for (i = 0; i < 33; i++)
        out->name[i] = d->name[i];
}

/*@ requires \valid(pos) && \valid(out) && \valid_read(buf + (0 .. len - 1));
    requires \separated(pos, out, buf + (0 .. len - 1));
    assigns *pos, *out;
    behavior truncated:
      assumes !room(len, *pos, 96);
      ensures *pos == \old(*pos);
      ensures \result == BATON_E_TRUNCATED;
    behavior bad_reserved:
      assumes room(len, *pos, 96) && LE64(buf + *pos + 88) != 0;
      ensures *pos == \old(*pos);
      ensures \result == BATON_E_INVAL;
    behavior ok:
      assumes room(len, *pos, 96) && LE64(buf + *pos + 88) == 0;
      ensures \result == 0;
      ensures *pos == \old(*pos) + 96 && *pos <= len;
      ensures out->total_memory == LE64(buf + \old(*pos));
      ensures out->free_memory == LE64(buf + \old(*pos) + 8);
      ensures out->alignment == LE64(buf + \old(*pos) + 16);
      ensures out->max_buffer_bytes == LE64(buf + \old(*pos) + 24);
      ensures out->type_mask == LE64(buf + \old(*pos) + 32);
      ensures out->op_mask == LE64(buf + \old(*pos) + 40);
      ensures out->n_threads == LE32(buf + \old(*pos) + 48);
      ensures out->version == LE32(buf + \old(*pos) + 52);
      ensures \forall integer k; 0 <= k < 32 ==>
                out->name[k] == \at((buf + *pos + 56)[k] < 128 ? (buf + *pos + 56)[k]
                                                                : (buf + *pos + 56)[k] - 256, Pre);
      ensures out->name[32] == 0;
    complete behaviors;
    disjoint behaviors;
*/
int baton_wire_decode_device_info(const uint8_t *buf, size_t len, size_t *pos,
                                  struct baton_device_info *out)
{
    size_t at = *pos;
    const uint8_t *p;
    struct baton_device_info d;

    if (!have(len, at, BATON_DEVICE_INFO_BYTES))
        return BATON_E_TRUNCATED;
    p = buf + at;
    if (load64(p + 88) != 0)
        return BATON_E_INVAL;
    read_device_info(p, &d);
    *pos = at + BATON_DEVICE_INFO_BYTES;
    store_device_info(out, &d);
    return 0;
}
