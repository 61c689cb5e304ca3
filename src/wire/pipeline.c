/* Decoders of the pipelined step (wire.h, docs/PROTOCOL.md "Registered
 * graphs" and "Asynchronous hand-off"): COPY_TENSOR_TO options, PEER_FENCE,
 * id records (GRAPH_REGISTER and COPY_ROUTE replies, GRAPH_FREE request),
 * and GRAPH_RUN's header, fences, inputs, hand-off and return.
 *
 * Written like decode.c and peer.c: pure, no libc, no shifts, no
 * allocation; little-endian integers are assembled by multiplication; every
 * function carries an ACSL contract that requires only valid, separated
 * pointers, so the proof (Frama-C WP with RTE goals) covers every byte
 * string. Each decoder first checks that its whole fixed-size record lies in
 * [*pos, len), reads it in place and advances *pos only on success.
 *
 * The logic names carry a `q` prefix so that this file can be analysed
 * beside decode.c and peer.c without clashes.
 */
#include <stddef.h>
#include <stdint.h>

#include "baton/status.h"
#include "wire/wire.h"

/*@ predicate qroom(integer len, integer pos, integer n) = pos + n <= len;

    axiomatic QLittleEndian {
      logic integer qle32{L}(uint8_t *p) reads p[0 .. 3];
      logic integer qle64{L}(uint8_t *p) reads p[0 .. 7];
      axiom qle32_def{L}: \forall uint8_t *p;
        qle32(p) == p[0] + 256 * p[1] + 65536 * p[2] + 16777216 * p[3];
      axiom qle64_def{L}: \forall uint8_t *p;
        qle64(p) == qle32(p) + 4294967296 * qle32(p + 4);
    }

    predicate qzeros{L}(uint8_t *p, integer n) = \forall integer k; 0 <= k < n ==> p[k] == 0;

    // The value of a u32 read as a two's-complement i32.
    logic integer qs32(integer u) = u <= 2147483647 ? u : u - 4294967296;

    // Well-formed records (layouts in wire.h).
    predicate opts_ok{L}(uint8_t *p, integer family) =
      qle32(p + 12) == 0 && qle32(p + 8) <= 1 &&
      (family == 0 ? qle64(p) == 0 && qle32(p + 8) == 0 : qle64(p) != 0);
    predicate pfence_ok{L}(uint8_t *p) =
      !qzeros(p, 16) && qle64(p + 16) != 0 && 1 <= qle32(p + 24) <= 65535 &&
      qle32(p + 28) == 0;
    predicate rfence_ok{L}(uint8_t *p) =
      !qzeros(p, 16) && qle64(p + 16) != 0 && qle64(p + 24) == 0;
    predicate handoff_ok{L}(uint8_t *p) =
      qle32(p) != 0 && qle32(p + 4) <= 1 && qle64(p + 8) != 0 && qle64(p + 16) != 0;
    // The bytes that follow a GRAPH_RUN header with these counts and flags.
    logic integer run_rest(integer nf, integer ni, integer flags) =
      32 * nf + 16 * ni + ((flags & 2) != 0 ? 24 : 0) + ((flags & 4) != 0 ? 8 : 0);
    predicate input_ok{L}(uint8_t *p) =
      qle32(p + 4) != 0 && qle32(p + 12) == 0 &&
      qs32(qle32(p + 8)) + qle32(p + 4) - 1 <= 2147483647;
*/

/*@ requires \valid_read(p + (0 .. 3));
    assigns \nothing;
    ensures \result == qle32(p);
*/
static uint32_t q_load32(const uint8_t *p)
{
    return (uint32_t)p[0] + 256u * p[1] + 65536u * p[2] + 16777216u * p[3];
}

/*@ requires \valid_read(p + (0 .. 7));
    assigns \nothing;
    ensures \result == qle64(p);
*/
static uint64_t q_load64(const uint8_t *p)
{
    uint64_t lo = q_load32(p);
    uint64_t hi = q_load32(p + 4);
    //@ assert lo + 4294967296 * hi <= UINT64_MAX;
    return lo + 4294967296u * hi;
}

/*@ assigns \nothing;
    ensures qroom(len, pos, n) ==> \result == 1;
    ensures !qroom(len, pos, n) ==> \result == 0;
*/
static int q_have(size_t len, size_t pos, size_t n)
{
    return pos <= len && n <= len - pos;
}

/*@ requires \valid_read(p + (0 .. n - 1));
    assigns \nothing;
    ensures \result == 0 || \result == 1;
    ensures \result == 1 <==> qzeros(p, n);
*/
static int q_all_zero(const uint8_t *p, size_t n)
{
    size_t i;

    /*@ loop invariant 0 <= i <= n;
        loop invariant qzeros(p, i);
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
static void q_copy16(uint8_t *dst, const uint8_t *src)
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

/* The checks of a PEER_FENCE (pfence_ok) and of a run's fence (rfence_ok),
 * apart from their decoders so that each proof goal stays small. */
/*@ requires \valid_read(p + (0 .. 31));
    assigns \nothing;
    ensures \result == 0 || \result == 1;
    ensures \result == 1 <==> pfence_ok(p);
    ensures \result == 1 ==> qle64(p + 16) != 0 && 1 <= qle32(p + 24) <= 65535;
*/
static int q_pfence_ok(const uint8_t *p)
{
    uint32_t status = q_load32(p + 24);

    if (q_all_zero(p, BATON_GRANT_ID_BYTES))
        return 0;
    if (q_load64(p + 16) == 0 || q_load32(p + 28) != 0)
        return 0;
    return status != 0 && status <= 65535u;
}

/*@ requires \valid_read(p + (0 .. 31));
    assigns \nothing;
    ensures \result == 0 || \result == 1;
    ensures \result == 1 <==> rfence_ok(p);
    ensures \result == 1 ==> qle64(p + 16) != 0;
*/
static int q_rfence_ok(const uint8_t *p)
{
    if (q_all_zero(p, BATON_GRANT_ID_BYTES))
        return 0;
    return q_load64(p + 16) != 0 && q_load64(p + 24) == 0;
}

/* Stores a grant id (the 16 bytes at buf + at) and a sequence number: the
 * last step of the decoders whose records start with both (a helper of its
 * own, whose postcondition is the callers' own, so that theirs follow at
 * once). */
/*@ requires at <= SIZE_MAX - 16;
    requires \valid(id + (0 .. 15)) && \valid(seq_out) && \valid_read(buf + (at .. at + 15));
    requires \separated(id + (0 .. 15), seq_out, buf + (at .. at + 15));
    assigns id[0 .. 15], *seq_out;
    ensures \forall integer k; 0 <= k < 16 ==> id[k] == \old(buf[at + k]);
    ensures *seq_out == seq;
*/
static void q_store_id_seq(uint8_t *id, uint64_t *seq_out, const uint8_t *buf, size_t at,
                           uint64_t seq)
{
    q_copy16(id, buf + at);
    *seq_out = seq;
}

/* A u32 as the i32 with the same bits, without an implementation-defined
 * conversion. */
/*@ assigns \nothing;
    ensures \result == qs32(u);
*/
static int32_t q_s32(uint32_t u)
{
    if (u <= 2147483647u)
        return (int32_t)u;
    //@ assert 4294967295 - u <= 2147483647;
    return -(int32_t)(4294967295u - u) - 1;
}

/*@ requires \valid_read(p + (0 .. 15));
    assigns \nothing;
    ensures \result == 0 || \result == 1;
    ensures \result == 1 <==> opts_ok(p, family);
*/
static int q_opts_ok(const uint8_t *p, uint8_t family)
{
    uint64_t seq = q_load64(p);
    uint32_t flags = q_load32(p + 8);

    if (q_load32(p + 12) != 0 || flags > BATON_COPY_ASYNC)
        return 0;
    if (family == BATON_PEER_FAMILY_NONE)
        return seq == 0 && flags == 0;
    return seq != 0;
}

/*@ requires \valid(pos) && \valid(out) && \valid_read(buf + (0 .. len - 1));
    requires \separated(pos, out, buf + (0 .. len - 1));
    assigns *pos, *out;
    behavior truncated:
      assumes !qroom(len, *pos, 16);
      ensures *pos == \old(*pos);
      ensures \result == BATON_E_TRUNCATED;
    behavior bad_fields:
      assumes qroom(len, *pos, 16) && !opts_ok(buf + *pos, family);
      ensures *pos == \old(*pos);
      ensures \result == BATON_E_INVAL;
    behavior ok:
      assumes qroom(len, *pos, 16) && opts_ok(buf + *pos, family);
      ensures \result == 0;
      ensures *pos == \old(*pos) + 16 && *pos <= len;
      ensures out->seq == \old(qle64(buf + *pos));
      ensures out->flags == \old(qle32(buf + *pos + 8)) && out->flags <= 1;
      ensures family == 0 ==> out->seq == 0 && out->flags == 0;
      ensures family != 0 ==> out->seq != 0;
    complete behaviors;
    disjoint behaviors;
*/
int baton_wire_decode_copy_options(const uint8_t *buf, size_t len, size_t *pos, uint8_t family,
                                   struct baton_copy_options *out)
{
    const uint8_t *p;

    if (!q_have(len, *pos, BATON_COPY_OPTIONS_BYTES))
        return BATON_E_TRUNCATED;
    p = buf + *pos;
    if (!q_opts_ok(p, family))
        return BATON_E_INVAL;
    out->seq = q_load64(p);
    out->flags = q_load32(p + 8);
    *pos = *pos + BATON_COPY_OPTIONS_BYTES;
    return 0;
}

/*@ requires \valid(pos) && \valid(out) && \valid_read(buf + (0 .. len - 1));
    requires \separated(pos, out, buf + (0 .. len - 1));
    assigns *pos, *out;
    behavior truncated:
      assumes !qroom(len, *pos, 32);
      ensures *pos == \old(*pos);
      ensures \result == BATON_E_TRUNCATED;
    behavior bad_fields:
      assumes qroom(len, *pos, 32) && !pfence_ok(buf + *pos);
      ensures *pos == \old(*pos);
      ensures \result == BATON_E_INVAL;
    behavior ok:
      assumes qroom(len, *pos, 32) && pfence_ok(buf + *pos);
      ensures \result == 0;
      ensures *pos == \old(*pos) + 32 && *pos <= len;
      ensures \forall integer k; 0 <= k < 16 ==> out->grant[k] == \old(buf[*pos + k]);
      ensures out->seq == \old(qle64(buf + *pos + 16)) && out->seq != 0;
      ensures out->status == \old(qle32(buf + *pos + 24));
      ensures 1 <= out->status <= 65535;
    complete behaviors;
    disjoint behaviors;
*/
int baton_wire_decode_peer_fence(const uint8_t *buf, size_t len, size_t *pos,
                                 struct baton_peer_fence *out)
{
    const uint8_t *p;
    uint64_t seq;
    uint32_t status;

    if (!q_have(len, *pos, BATON_PEER_FENCE_BYTES))
        return BATON_E_TRUNCATED;
    p = buf + *pos;
    if (!q_pfence_ok(p))
        return BATON_E_INVAL;
    seq = q_load64(p + 16);
    status = q_load32(p + 24);
    out->status = status;
    q_store_id_seq(out->grant, &out->seq, buf, *pos, seq);
    *pos = *pos + BATON_PEER_FENCE_BYTES;
    return 0;
}

/*@ requires \valid(pos) && \valid(id) && \valid_read(buf + (0 .. len - 1));
    requires \separated(pos, id, buf + (0 .. len - 1));
    assigns *pos, *id;
    behavior truncated:
      assumes !qroom(len, *pos, 8);
      ensures *pos == \old(*pos);
      ensures \result == BATON_E_TRUNCATED;
    behavior bad_fields:
      assumes qroom(len, *pos, 8);
      assumes qle32(buf + *pos) == 0 || qle32(buf + *pos + 4) != 0;
      ensures *pos == \old(*pos);
      ensures \result == BATON_E_INVAL;
    behavior ok:
      assumes qroom(len, *pos, 8);
      assumes qle32(buf + *pos) != 0 && qle32(buf + *pos + 4) == 0;
      ensures \result == 0;
      ensures *pos == \old(*pos) + 8 && *pos <= len;
      ensures *id == \old(qle32(buf + *pos)) && *id != 0;
    complete behaviors;
    disjoint behaviors;
*/
int baton_wire_decode_graph_id(const uint8_t *buf, size_t len, size_t *pos, uint32_t *id)
{
    const uint8_t *p;
    uint32_t v;

    if (!q_have(len, *pos, BATON_GRAPH_ID_BYTES))
        return BATON_E_TRUNCATED;
    p = buf + *pos;
    v = q_load32(p);
    if (v == 0 || q_load32(p + 4) != 0)
        return BATON_E_INVAL;
    *id = v;
    *pos = *pos + BATON_GRAPH_ID_BYTES;
    return 0;
}

/* The bytes that follow a GRAPH_RUN header (run_rest): at most
 * 4 * 32 + 4 * 16 + 24 + 8 = 224. */
/*@ requires n_fences <= 4 && n_inputs <= 4 && flags <= 7;
    assigns \nothing;
    ensures \result == run_rest(n_fences, n_inputs, flags);
*/
static size_t q_run_rest(uint32_t n_fences, uint32_t n_inputs, uint32_t flags)
{
    size_t rest = BATON_RUN_FENCE_BYTES * n_fences + BATON_RUN_INPUT_BYTES * n_inputs;
    if ((flags & BATON_RUN_HANDOFF) != 0)
        rest += BATON_RUN_HANDOFF_BYTES;
    if ((flags & BATON_RUN_RETURN) != 0)
        rest += BATON_RUN_RETURN_BYTES;
    return rest;
}

/*@ requires \valid(pos) && \valid(out) && \valid_read(buf + (0 .. len - 1));
    requires \separated(pos, out, buf + (0 .. len - 1));
    assigns *pos, *out;
    behavior truncated:
      assumes !qroom(len, *pos, 16);
      ensures *pos == \old(*pos);
      ensures \result == BATON_E_TRUNCATED;
    behavior too_many:
      assumes qroom(len, *pos, 16);
      assumes qle32(buf + *pos + 8) > 4 || qle32(buf + *pos + 12) > 4;
      ensures *pos == \old(*pos);
      ensures \result == BATON_E_LIMIT;
    behavior bad_fields:
      assumes qroom(len, *pos, 16);
      assumes qle32(buf + *pos + 8) <= 4 && qle32(buf + *pos + 12) <= 4;
      assumes qle32(buf + *pos) == 0 || qle32(buf + *pos + 4) > 7 ||
              len - (*pos + 16) != run_rest(qle32(buf + *pos + 8), qle32(buf + *pos + 12),
                                            qle32(buf + *pos + 4));
      ensures *pos == \old(*pos);
      ensures \result == BATON_E_INVAL;
    behavior ok:
      assumes qroom(len, *pos, 16);
      assumes qle32(buf + *pos + 8) <= 4 && qle32(buf + *pos + 12) <= 4;
      assumes qle32(buf + *pos) != 0 && qle32(buf + *pos + 4) <= 7;
      assumes len - (*pos + 16) == run_rest(qle32(buf + *pos + 8), qle32(buf + *pos + 12),
                                            qle32(buf + *pos + 4));
      ensures \result == 0;
      ensures *pos == \old(*pos) + 16 && *pos <= len;
      ensures out->graph == \old(qle32(buf + *pos)) && out->graph != 0;
      ensures out->flags == \old(qle32(buf + *pos + 4)) && out->flags <= 7;
      ensures out->n_fences == \old(qle32(buf + *pos + 8)) && out->n_fences <= 4;
      ensures out->n_inputs == \old(qle32(buf + *pos + 12)) && out->n_inputs <= 4;
      ensures len - *pos == run_rest(out->n_fences, out->n_inputs, out->flags);
    complete behaviors;
    disjoint behaviors;
*/
int baton_wire_decode_run_header(const uint8_t *buf, size_t len, size_t *pos,
                                 struct baton_run_header *out)
{
    const uint8_t *p;
    uint32_t graph, flags, n_fences, n_inputs;

    if (!q_have(len, *pos, BATON_RUN_HEADER_BYTES))
        return BATON_E_TRUNCATED;
    p = buf + *pos;
    graph = q_load32(p);
    flags = q_load32(p + 4);
    n_fences = q_load32(p + 8);
    n_inputs = q_load32(p + 12);
    if (n_fences > BATON_MAX_RUN_FENCES || n_inputs > BATON_MAX_RUN_INPUTS)
        return BATON_E_LIMIT;
    if (graph == 0 || flags > BATON_RUN_FLAGS_ALL ||
        len - *pos - BATON_RUN_HEADER_BYTES != q_run_rest(n_fences, n_inputs, flags))
        return BATON_E_INVAL;
    out->graph = graph;
    out->flags = flags;
    out->n_fences = n_fences;
    out->n_inputs = n_inputs;
    *pos = *pos + BATON_RUN_HEADER_BYTES;
    return 0;
}

/*@ requires \valid(pos) && \valid(out) && \valid_read(buf + (0 .. len - 1));
    requires \separated(pos, out, buf + (0 .. len - 1));
    assigns *pos, *out;
    behavior truncated:
      assumes !qroom(len, *pos, 32);
      ensures *pos == \old(*pos);
      ensures \result == BATON_E_TRUNCATED;
    behavior bad_fields:
      assumes qroom(len, *pos, 32) && !rfence_ok(buf + *pos);
      ensures *pos == \old(*pos);
      ensures \result == BATON_E_INVAL;
    behavior ok:
      assumes qroom(len, *pos, 32) && rfence_ok(buf + *pos);
      ensures \result == 0;
      ensures *pos == \old(*pos) + 32 && *pos <= len;
      ensures \forall integer k; 0 <= k < 16 ==> out->grant[k] == \old(buf[*pos + k]);
      ensures out->seq == \old(qle64(buf + *pos + 16)) && out->seq != 0;
    complete behaviors;
    disjoint behaviors;
*/
int baton_wire_decode_run_fence(const uint8_t *buf, size_t len, size_t *pos,
                                struct baton_run_fence *out)
{
    const uint8_t *p;
    uint64_t seq;

    if (!q_have(len, *pos, BATON_RUN_FENCE_BYTES))
        return BATON_E_TRUNCATED;
    p = buf + *pos;
    if (!q_rfence_ok(p))
        return BATON_E_INVAL;
    seq = q_load64(p + 16);
    q_store_id_seq(out->grant, &out->seq, buf, *pos, seq);
    *pos = *pos + BATON_RUN_FENCE_BYTES;
    return 0;
}

/*@ requires \valid(pos) && \valid(out) && \valid_read(buf + (0 .. len - 1));
    requires \separated(pos, out, buf + (0 .. len - 1));
    assigns *pos, *out;
    behavior truncated:
      assumes !qroom(len, *pos, 16);
      ensures *pos == \old(*pos);
      ensures \result == BATON_E_TRUNCATED;
    behavior bad_fields:
      assumes qroom(len, *pos, 16) && !input_ok(buf + *pos);
      ensures *pos == \old(*pos);
      ensures \result == BATON_E_INVAL;
    behavior ok:
      assumes qroom(len, *pos, 16) && input_ok(buf + *pos);
      ensures \result == 0;
      ensures *pos == \old(*pos) + 16 && *pos <= len;
      ensures out->leaf == \old(qle32(buf + *pos));
      ensures out->count == \old(qle32(buf + *pos + 4)) && out->count != 0;
      ensures out->first == \old(qs32(qle32(buf + *pos + 8)));
      ensures out->first + out->count - 1 <= 2147483647;
    complete behaviors;
    disjoint behaviors;
*/
int baton_wire_decode_run_input(const uint8_t *buf, size_t len, size_t *pos,
                                struct baton_run_input *out)
{
    const uint8_t *p;
    uint32_t leaf, count;
    int32_t first;

    if (!q_have(len, *pos, BATON_RUN_INPUT_BYTES))
        return BATON_E_TRUNCATED;
    p = buf + *pos;
    leaf = q_load32(p);
    count = q_load32(p + 4);
    first = q_s32(q_load32(p + 8));
    if (count == 0 || q_load32(p + 12) != 0)
        return BATON_E_INVAL;
    /* first + count - 1 <= 2^31 - 1, in 64-bit arithmetic (no wrap) */
    if ((int64_t)first + (int64_t)count - 1 > 2147483647)
        return BATON_E_INVAL;
    out->leaf = leaf;
    out->count = count;
    out->first = first;
    *pos = *pos + BATON_RUN_INPUT_BYTES;
    return 0;
}

/* The checks of a hand-off (handoff_ok), apart from the decoder so that
 * each proof goal stays small. */
/*@ requires \valid_read(p + (0 .. 23));
    assigns \nothing;
    ensures \result == 0 || \result == 1;
    ensures \result == 1 <==> handoff_ok(p);
    ensures \result == 1 ==> qle32(p) != 0 && qle32(p + 4) <= 1;
    ensures \result == 1 ==> qle64(p + 8) != 0 && qle64(p + 16) != 0;
*/
static int q_handoff_ok(const uint8_t *p)
{
    return q_load32(p) != 0 && q_load32(p + 4) <= BATON_COPY_ASYNC && q_load64(p + 8) != 0 &&
           q_load64(p + 16) != 0;
}

/*@ requires \valid(pos) && \valid(out) && \valid_read(buf + (0 .. len - 1));
    requires \separated(pos, out, buf + (0 .. len - 1));
    assigns *pos, *out;
    behavior truncated:
      assumes !qroom(len, *pos, 24);
      ensures *pos == \old(*pos);
      ensures \result == BATON_E_TRUNCATED;
    behavior bad_fields:
      assumes qroom(len, *pos, 24) && !handoff_ok(buf + *pos);
      ensures *pos == \old(*pos);
      ensures \result == BATON_E_INVAL;
    behavior ok:
      assumes qroom(len, *pos, 24) && handoff_ok(buf + *pos);
      ensures \result == 0;
      ensures *pos == \old(*pos) + 24 && *pos <= len;
      ensures out->route == \old(qle32(buf + *pos)) && out->route != 0;
      ensures out->flags == \old(qle32(buf + *pos + 4)) && out->flags <= 1;
      ensures out->seq == \old(qle64(buf + *pos + 8)) && out->seq != 0;
      ensures out->n == \old(qle64(buf + *pos + 16)) && out->n != 0;
    complete behaviors;
    disjoint behaviors;
*/
int baton_wire_decode_run_handoff(const uint8_t *buf, size_t len, size_t *pos,
                                  struct baton_run_handoff *out)
{
    const uint8_t *p;
    uint64_t seq, n;

    if (!q_have(len, *pos, BATON_RUN_HANDOFF_BYTES))
        return BATON_E_TRUNCATED;
    p = buf + *pos;
    if (!q_handoff_ok(p))
        return BATON_E_INVAL;
    seq = q_load64(p + 8);
    n = q_load64(p + 16);
    out->route = q_load32(p);
    out->flags = q_load32(p + 4);
    out->seq = seq;
    out->n = n;
    *pos = *pos + BATON_RUN_HANDOFF_BYTES;
    return 0;
}

/*@ requires \valid(pos) && \valid(out) && \valid_read(buf + (0 .. len - 1));
    requires \separated(pos, out, buf + (0 .. len - 1));
    assigns *pos, *out;
    behavior truncated:
      assumes !qroom(len, *pos, 8);
      ensures *pos == \old(*pos);
      ensures \result == BATON_E_TRUNCATED;
    behavior bad_fields:
      assumes qroom(len, *pos, 8) && qle32(buf + *pos + 4) != 0;
      ensures *pos == \old(*pos);
      ensures \result == BATON_E_INVAL;
    behavior ok:
      assumes qroom(len, *pos, 8) && qle32(buf + *pos + 4) == 0;
      ensures \result == 0;
      ensures *pos == \old(*pos) + 8 && *pos <= len;
      ensures out->leaf == \old(qle32(buf + *pos));
    complete behaviors;
    disjoint behaviors;
*/
int baton_wire_decode_run_return(const uint8_t *buf, size_t len, size_t *pos,
                                 struct baton_run_return *out)
{
    const uint8_t *p;

    if (!q_have(len, *pos, BATON_RUN_RETURN_BYTES))
        return BATON_E_TRUNCATED;
    p = buf + *pos;
    if (q_load32(p + 4) != 0)
        return BATON_E_INVAL;
    out->leaf = q_load32(p);
    *pos = *pos + BATON_RUN_RETURN_BYTES;
    return 0;
}
