/* Direct-path decoders (wire.h, docs/PROTOCOL.md "Direct path"): GRANT_WRITE
 * request, grant id, COPY_TENSOR_TO destination, PEER_WRITE header and the
 * COPY_TENSOR_TO reply (the options, PEER_FENCE and the registered-graph
 * records are in pipeline.c).
 *
 * Written like decode.c: pure, no libc, no shifts, no allocation;
 * little-endian integers are assembled by multiplication; every function
 * carries an ACSL contract that requires only valid, separated pointers, so
 * the proof (Frama-C WP with RTE goals) covers every byte string. Each
 * decoder first checks that its whole fixed-size record lies in [*pos, len),
 * reads it in place and advances *pos only on success.
 *
 * The logic names carry a `p` prefix (ple32, proom, pzeros) so that this
 * file and decode.c can be analysed in one Frama-C run without clashes.
 */
#include <stddef.h>
#include <stdint.h>

#include "baton/status.h"
#include "wire/wire.h"

/*@ // n bytes remain after pos (in mathematical integers: no wrap).
    predicate proom(integer len, integer pos, integer n) = pos + n <= len;

    // Little-endian values of the bytes at p (axioms, so that provers unfold
    // them only where a goal is about bytes).
    axiomatic PeerLittleEndian {
      logic integer ple16{L}(uint8_t *p) reads p[0 .. 1];
      logic integer ple32{L}(uint8_t *p) reads p[0 .. 3];
      logic integer ple64{L}(uint8_t *p) reads p[0 .. 7];
      axiom ple16_def{L}: \forall uint8_t *p; ple16(p) == p[0] + 256 * p[1];
      axiom ple32_def{L}: \forall uint8_t *p;
        ple32(p) == p[0] + 256 * p[1] + 65536 * p[2] + 16777216 * p[3];
      axiom ple64_def{L}: \forall uint8_t *p;
        ple64(p) == ple32(p) + 4294967296 * ple32(p + 4);
    }

    // The n bytes at p are all zero.
    predicate pzeros{L}(uint8_t *p, integer n) = \forall integer k; 0 <= k < n ==> p[k] == 0;

    // A well-formed COPY_TENSOR_TO destination at p (48 bytes): reserved
    // bytes zero; family 0 with every other field zero (statistics query),
    // or family 4 (zero padding after the 4 address bytes) or 6, each with a
    // non-zero port and a non-zero grant id.
    predicate dest_none_ok{L}(uint8_t *p) = ple16(p + 2) == 0 && pzeros(p + 8, 40);
    predicate dest_ip_ok{L}(uint8_t *p) =
      ple16(p + 2) != 0 && !pzeros(p + 24, 16) && (p[0] == 4 ==> pzeros(p + 12, 12));
    predicate dest_ok{L}(uint8_t *p) =
      p[1] == 0 && ple32(p + 4) == 0 &&
      ((p[0] == 0 && dest_none_ok(p)) || ((p[0] == 4 || p[0] == 6) && dest_ip_ok(p)));

    // A well-formed COPY_TENSOR_TO reply at p (48 bytes); the reserved u64
    // is read as two u32 halves.
    predicate result_ok{L}(uint8_t *p) =
      ple32(p) < BATON_COPY_OUTCOME_LIMIT && ple32(p + 4) <= 65535 &&
      ple32(p + 40) == 0 && ple32(p + 44) == 0;
*/

/*@ requires \valid_read(p + (0 .. 1));
    assigns \nothing;
    ensures \result == ple16(p);
*/
static uint16_t peer_load16(const uint8_t *p)
{
    return (uint16_t)((uint32_t)p[0] + 256u * p[1]);
}

/*@ requires \valid_read(p + (0 .. 3));
    assigns \nothing;
    ensures \result == ple32(p);
*/
static uint32_t peer_load32(const uint8_t *p)
{
    return (uint32_t)p[0] + 256u * p[1] + 65536u * p[2] + 16777216u * p[3];
}

/*@ requires \valid_read(p + (0 .. 7));
    assigns \nothing;
    ensures \result == ple64(p);
*/
static uint64_t peer_load64(const uint8_t *p)
{
    uint64_t lo = peer_load32(p);
    uint64_t hi = peer_load32(p + 4);
    //@ assert lo + 4294967296 * hi <= UINT64_MAX;
    return lo + 4294967296u * hi;
}

/*@ assigns \nothing;
    ensures proom(len, pos, n) ==> \result == 1;
    ensures !proom(len, pos, n) ==> \result == 0;
*/
static int peer_have(size_t len, size_t pos, size_t n)
{
    return pos <= len && n <= len - pos;
}

/*@ requires \valid_read(p + (0 .. n - 1));
    assigns \nothing;
    ensures \result == 0 || \result == 1;
    ensures \result == 1 <==> pzeros(p, n);
*/
static int peer_all_zero(const uint8_t *p, size_t n)
{
    size_t i;

    /*@ loop invariant 0 <= i <= n;
        loop invariant pzeros(p, i);
        loop assigns i;
        loop variant n - i;
    */
    for (i = 0; i < n; i++) {
        if (p[i] != 0)
            return 0;
    }
    return 1;
}

/*@ requires \valid(dst + (0 .. 15)) && \valid_read(src + (0 .. 15));
    requires \separated(dst + (0 .. 15), src + (0 .. 15));
    assigns dst[0 .. 15];
    ensures \forall integer k; 0 <= k < 16 ==> dst[k] == \old(src[k]);
*/
static void peer_copy16(uint8_t *dst, const uint8_t *src)
{
    size_t i;

    /*@ loop invariant 0 <= i <= 16;
        loop invariant \forall integer k; 0 <= k < i ==> dst[k] == \at(src[k], Pre);
        loop assigns i, dst[0 .. 15];
        loop variant 16 - i;
    */
    for (i = 0; i < 16; i++)
        dst[i] = src[i];
}

/* The byte fields of a COPY_TENSOR_TO destination at p: family, address,
 * grant id (in one function, so that the proof goals about these fields,
 * which share one memory chunk with the input, stay small). */
/*@ requires \valid(out) && \valid_read(p + (0 .. 47));
    requires \separated(out, p + (0 .. 47));
    assigns out->family, out->addr[0 .. 15], out->grant[0 .. 15];
    ensures out->family == \old(p[0]);
    ensures \forall integer k; 0 <= k < 16 ==> out->addr[k] == \old(p[8 + k]);
    ensures \forall integer k; 0 <= k < 16 ==> out->grant[k] == \old(p[24 + k]);
*/
static void peer_copy_dest(struct baton_peer_dest *out, const uint8_t *p)
{
    size_t i;

    /*@ loop invariant 0 <= i <= 16;
        loop invariant \forall integer k; 0 <= k < i ==> out->addr[k] == p[8 + k];
        loop assigns i, out->addr[0 .. 15];
        loop variant 16 - i;
    */
    for (i = 0; i < 16; i++)
        out->addr[i] = p[8 + i];
    /*@ loop invariant 0 <= i <= 16;
        loop invariant \forall integer k; 0 <= k < i ==> out->grant[k] == p[24 + k];
        loop assigns i, out->grant[0 .. 15];
        loop variant 16 - i;
    */
    for (i = 0; i < 16; i++)
        out->grant[i] = p[24 + i];
    out->family = p[0];
}

/* The checks of a COPY_TENSOR_TO destination (dest_ok), apart from the
 * decoder so that each proof goal stays small. */
/*@ requires \valid_read(p + (0 .. 47));
    assigns \nothing;
    ensures \result == 0 || \result == 1;
    ensures \result == 1 <==> dest_ok(p);
    ensures \result == 1 ==> p[0] == 0 || p[0] == 4 || p[0] == 6;
    ensures \result == 1 ==> (p[0] != 0 <==> ple16(p + 2) != 0);
*/
static int peer_dest_ok(const uint8_t *p)
{
    if (p[1] != 0 || peer_load32(p + 4) != 0)
        return 0;
    if (p[0] == BATON_PEER_FAMILY_NONE)
        return peer_load16(p + 2) == 0 && peer_all_zero(p + 8, 40);
    if (p[0] != BATON_PEER_FAMILY_IPV4 && p[0] != BATON_PEER_FAMILY_IPV6)
        return 0;
    if (peer_load16(p + 2) == 0 || peer_all_zero(p + 24, BATON_GRANT_ID_BYTES))
        return 0;
    if (p[0] == BATON_PEER_FAMILY_IPV4 && !peer_all_zero(p + 12, 12))
        return 0;
    return 1;
}

/*@ requires \valid_read(p + (0 .. 47));
    assigns \nothing;
    ensures \result == 0 || \result == 1;
    ensures \result == 1 <==> result_ok(p);
    ensures \result == 1 ==> ple32(p) < BATON_COPY_OUTCOME_LIMIT && ple32(p + 4) <= 65535;
*/
static int peer_result_ok(const uint8_t *p)
{
    return peer_load32(p) < BATON_COPY_OUTCOME_LIMIT && peer_load32(p + 4) <= 65535u &&
           peer_load32(p + 40) == 0 && peer_load32(p + 44) == 0;
}

/*@ requires \valid(pos) && \valid(out) && \valid_read(buf + (0 .. len - 1));
    requires \separated(pos, out, buf + (0 .. len - 1));
    assigns *pos, *out;
    behavior truncated:
      assumes !proom(len, *pos, 24);
      ensures *pos == \old(*pos);
      ensures \result == BATON_E_TRUNCATED;
    behavior zero_length:
      assumes proom(len, *pos, 24) && ple64(buf + *pos + 16) == 0;
      ensures *pos == \old(*pos);
      ensures \result == BATON_E_INVAL;
    behavior wraps:
      assumes proom(len, *pos, 24) && ple64(buf + *pos + 16) != 0;
      assumes ple64(buf + *pos + 8) + ple64(buf + *pos + 16) > UINT64_MAX;
      ensures *pos == \old(*pos);
      ensures \result == BATON_E_OVERFLOW;
    behavior ok:
      assumes proom(len, *pos, 24) && ple64(buf + *pos + 16) != 0;
      assumes ple64(buf + *pos + 8) + ple64(buf + *pos + 16) <= UINT64_MAX;
      ensures \result == 0;
      ensures *pos == \old(*pos) + 24 && *pos <= len;
      ensures out->handle == ple64(buf + \old(*pos));
      ensures out->offset == ple64(buf + \old(*pos) + 8);
      ensures out->length == ple64(buf + \old(*pos) + 16);
      ensures out->length != 0 && out->offset + out->length <= UINT64_MAX;
    complete behaviors;
    disjoint behaviors;
*/
int baton_wire_decode_grant_request(const uint8_t *buf, size_t len, size_t *pos,
                                    struct baton_grant_request *out)
{
    const uint8_t *p;
    uint64_t handle;
    uint64_t offset;
    uint64_t length;

    if (!peer_have(len, *pos, BATON_GRANT_REQUEST_BYTES))
        return BATON_E_TRUNCATED;
    p = buf + *pos;
    handle = peer_load64(p);
    offset = peer_load64(p + 8);
    length = peer_load64(p + 16);
    if (length == 0)
        return BATON_E_INVAL;
    if (length > UINT64_MAX - offset)
        return BATON_E_OVERFLOW;
    out->handle = handle;
    out->offset = offset;
    out->length = length;
    *pos = *pos + BATON_GRANT_REQUEST_BYTES;
    return 0;
}

/*@ requires \valid(pos) && \valid(id + (0 .. 15)) && \valid_read(buf + (0 .. len - 1));
    requires \separated(pos, id + (0 .. 15), buf + (0 .. len - 1));
    assigns *pos, id[0 .. 15];
    behavior truncated:
      assumes !proom(len, *pos, 16);
      ensures *pos == \old(*pos);
      ensures \result == BATON_E_TRUNCATED;
    behavior zero_id:
      assumes proom(len, *pos, 16) && pzeros(buf + *pos, 16);
      ensures *pos == \old(*pos);
      ensures \result == BATON_E_INVAL;
    behavior ok:
      assumes proom(len, *pos, 16) && !pzeros(buf + *pos, 16);
      ensures \result == 0;
      ensures *pos == \old(*pos) + 16 && *pos <= len;
      ensures \forall integer k; 0 <= k < 16 ==> id[k] == \old(buf[*pos + k]);
    complete behaviors;
    disjoint behaviors;
*/
int baton_wire_decode_grant_id(const uint8_t *buf, size_t len, size_t *pos,
                               uint8_t id[BATON_GRANT_ID_BYTES])
{
    const uint8_t *p;

    if (!peer_have(len, *pos, BATON_GRANT_ID_BYTES))
        return BATON_E_TRUNCATED;
    p = buf + *pos;
    if (peer_all_zero(p, BATON_GRANT_ID_BYTES))
        return BATON_E_INVAL;
    peer_copy16(id, p);
    *pos = *pos + BATON_GRANT_ID_BYTES;
    return 0;
}

/*@ requires \valid(pos) && \valid(out) && \valid_read(buf + (0 .. len - 1));
    requires \separated(pos, out, buf + (0 .. len - 1));
    assigns *pos, *out;
    behavior truncated:
      assumes !proom(len, *pos, 48);
      ensures *pos == \old(*pos);
      ensures \result == BATON_E_TRUNCATED;
    behavior bad_fields:
      assumes proom(len, *pos, 48) && !dest_ok(buf + *pos);
      ensures *pos == \old(*pos);
      ensures \result == BATON_E_INVAL;
    behavior ok:
      assumes proom(len, *pos, 48) && dest_ok(buf + *pos);
      ensures \result == 0;
      ensures *pos == \old(*pos) + 48 && *pos <= len;
      ensures out->family == \old(buf[*pos]);
      ensures out->family == 0 || out->family == 4 || out->family == 6;
      ensures out->port == \old(ple16(buf + *pos + 2));
      ensures out->family != 0 ==> out->port != 0;
      ensures \forall integer k; 0 <= k < 16 ==> out->addr[k] == \old(buf[*pos + 8 + k]);
      ensures \forall integer k; 0 <= k < 16 ==> out->grant[k] == \old(buf[*pos + 24 + k]);
      ensures out->grant_offset == \old(ple64(buf + *pos + 40));
    complete behaviors;
    disjoint behaviors;
*/
int baton_wire_decode_peer_dest(const uint8_t *buf, size_t len, size_t *pos,
                                struct baton_peer_dest *out)
{
    const uint8_t *p;
    uint16_t port;
    uint64_t grant_offset;

    if (!peer_have(len, *pos, BATON_PEER_DEST_BYTES))
        return BATON_E_TRUNCATED;
    p = buf + *pos;
    if (!peer_dest_ok(p))
        return BATON_E_INVAL;
    port = peer_load16(p + 2);
    grant_offset = peer_load64(p + 40);
    peer_copy_dest(out, p);
    out->port = port;
    out->grant_offset = grant_offset;
    *pos = *pos + BATON_PEER_DEST_BYTES;
    return 0;
}

/*@ requires \valid(pos) && \valid(out) && \valid_read(buf + (0 .. len - 1));
    requires \separated(pos, out, buf + (0 .. len - 1));
    assigns *pos, *out;
    behavior truncated:
      assumes !proom(len, *pos, 40);
      ensures *pos == \old(*pos);
      ensures \result == BATON_E_TRUNCATED;
    behavior bad_fields:
      assumes proom(len, *pos, 40);
      assumes pzeros(buf + *pos, 16) || ple64(buf + *pos + 24) == 0 ||
              ple64(buf + *pos + 32) == 0;
      ensures *pos == \old(*pos);
      ensures \result == BATON_E_INVAL;
    behavior ok:
      assumes proom(len, *pos, 40);
      assumes !pzeros(buf + *pos, 16) && ple64(buf + *pos + 24) != 0 &&
              ple64(buf + *pos + 32) != 0;
      ensures \result == 0;
      ensures *pos == \old(*pos) + 40 && *pos <= len;
      ensures \forall integer k; 0 <= k < 16 ==> out->grant[k] == \old(buf[*pos + k]);
      ensures out->offset == \old(ple64(buf + *pos + 16));
      ensures out->n == \old(ple64(buf + *pos + 24)) && out->n != 0;
      ensures out->seq == \old(ple64(buf + *pos + 32)) && out->seq != 0;
    complete behaviors;
    disjoint behaviors;
*/
int baton_wire_decode_peer_write(const uint8_t *buf, size_t len, size_t *pos,
                                 struct baton_peer_write_header *out)
{
    const uint8_t *p;
    uint64_t offset;
    uint64_t n;
    uint64_t seq;

    if (!peer_have(len, *pos, BATON_PEER_WRITE_HEADER_BYTES))
        return BATON_E_TRUNCATED;
    p = buf + *pos;
    n = peer_load64(p + 24);
    seq = peer_load64(p + 32);
    if (peer_all_zero(p, BATON_GRANT_ID_BYTES) || n == 0 || seq == 0)
        return BATON_E_INVAL;
    offset = peer_load64(p + 16);
    peer_copy16(out->grant, p);
    out->offset = offset;
    out->n = n;
    out->seq = seq;
    *pos = *pos + BATON_PEER_WRITE_HEADER_BYTES;
    return 0;
}

/*@ requires \valid(pos) && \valid(out) && \valid_read(buf + (0 .. len - 1));
    requires \separated(pos, out, buf + (0 .. len - 1));
    assigns *pos, *out;
    behavior truncated:
      assumes !proom(len, *pos, 48);
      ensures *pos == \old(*pos);
      ensures \result == BATON_E_TRUNCATED;
    behavior bad_fields:
      assumes proom(len, *pos, 48) && !result_ok(buf + *pos);
      ensures *pos == \old(*pos);
      ensures \result == BATON_E_INVAL;
    behavior ok:
      assumes proom(len, *pos, 48) && result_ok(buf + *pos);
      ensures \result == 0;
      ensures *pos == \old(*pos) + 48 && *pos <= len;
      ensures out->result == ple32(buf + \old(*pos)) && out->result < BATON_COPY_OUTCOME_LIMIT;
      ensures out->status == ple32(buf + \old(*pos) + 4) && out->status <= 65535;
      ensures out->peer_bytes_sent == ple64(buf + \old(*pos) + 8);
      ensures out->peer_bytes_received == ple64(buf + \old(*pos) + 16);
      ensures out->copies_done == ple64(buf + \old(*pos) + 24);
      ensures out->copies_not_done == ple64(buf + \old(*pos) + 32);
    complete behaviors;
    disjoint behaviors;
*/
int baton_wire_decode_copy_result(const uint8_t *buf, size_t len, size_t *pos,
                                  struct baton_copy_result *out)
{
    const uint8_t *p;

    if (!peer_have(len, *pos, BATON_COPY_RESULT_BYTES))
        return BATON_E_TRUNCATED;
    p = buf + *pos;
    if (!peer_result_ok(p))
        return BATON_E_INVAL;
    out->result = peer_load32(p);
    out->status = peer_load32(p + 4);
    out->peer_bytes_sent = peer_load64(p + 8);
    out->peer_bytes_received = peer_load64(p + 16);
    out->copies_done = peer_load64(p + 24);
    out->copies_not_done = peer_load64(p + 32);
    *pos = *pos + BATON_COPY_RESULT_BYTES;
    return 0;
}
