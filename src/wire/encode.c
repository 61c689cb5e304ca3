/* Wire encoders (wire.h, docs/PROTOCOL.md).
 *
 * Written like the decoders: pure, no libc, no shifts; little-endian bytes
 * are split off by division. Every function carries an ACSL contract and is
 * proven by verify/run.sh (Frama-C WP, RTE goals included): it writes
 * exactly its record's bytes of a caller buffer of the documented size,
 * separated from the input, and the bytes it writes read back, through the
 * decoders' own little-endian logic functions, as the input's fields at the
 * documented offsets with every reserved byte 0.
 */
#include <stddef.h>
#include <stdint.h>

#include "core/limits.h"
#include "wire/wire.h"

/*@ // As in decode.c: little-endian value of bytes b0 (least significant) .. bn.
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

    // The byte a char is stored as (two's complement), and the u32 an i32
    // is stored as: the inverses of decode.c's name and pipeline.c's qs32.
    logic integer char_byte(integer c) = c < 0 ? c + 256 : c;
    logic integer stored_u32(integer v) = v < 0 ? v + 4294967296 : v;

    // Byte k of a NUL-padded name field: the name's byte up to its first NUL,
    // 0 from there on (what strnlen, memcpy and zero padding write). Defined
    // by two axioms that cover every case of the one new symbol.
    predicate nul_within{L}(char *s, integer n) = \exists integer j; 0 <= j < n && s[j] == 0;
    axiomatic NameField {
      logic integer name_byte{L}(char *s, integer k) reads s[0 .. k];
      axiom name_byte_nul{L}: \forall char *s, integer k;
        nul_within(s, k + 1) ==> name_byte(s, k) == 0;
      axiom name_byte_char{L}: \forall char *s, integer k;
        !nul_within(s, k + 1) ==> name_byte(s, k) == char_byte(s[k]);
    }
*/

#define LE16(P) le16((P)[0], (P)[1])
#define LE32(P) le32((P)[0], (P)[1], (P)[2], (P)[3])
#define LE64(P) le64((P)[0], (P)[1], (P)[2], (P)[3], (P)[4], (P)[5], (P)[6], (P)[7])

/*@ requires \valid(p + (0 .. 1));
    assigns p[0 .. 1];
    ensures LE16(p) == v;
*/
void baton_wire_put_u16(uint8_t *p, uint16_t v)
{
    p[0] = (uint8_t)(v % 256u);
    p[1] = (uint8_t)(v / 256u);
}

/*@ requires \valid(p + (0 .. 3));
    assigns p[0 .. 3];
    ensures LE32(p) == v;
*/
void baton_wire_put_u32(uint8_t *p, uint32_t v)
{
    baton_wire_put_u16(p, (uint16_t)(v % 65536u));
    baton_wire_put_u16(p + 2, (uint16_t)(v / 65536u));
}

/*@ requires \valid(p + (0 .. 7));
    assigns p[0 .. 7];
    ensures LE64(p) == v;
*/
void baton_wire_put_u64(uint8_t *p, uint64_t v)
{
    baton_wire_put_u32(p, (uint32_t)(v % 4294967296u));
    baton_wire_put_u32(p + 4, (uint32_t)(v / 4294967296u));
}

/*@ requires \valid(dst + (0 .. n - 1)) && \valid_read(src + (0 .. n - 1));
    requires \separated(dst + (0 .. n - 1), src + (0 .. n - 1));
    assigns dst[0 .. n - 1];
    ensures \forall integer k; 0 <= k < n ==> dst[k] == src[k];
*/
static void put_bytes(uint8_t *dst, const uint8_t *src, size_t n)
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

/* The 32-byte name field: the name up to its first NUL, NUL-padded. */
/*@ requires \valid(dst + (0 .. 31)) && \valid_read(name + (0 .. 31));
    requires \separated(dst + (0 .. 31), name + (0 .. 31));
    assigns dst[0 .. 31];
    ensures \forall integer k; 0 <= k < 32 ==> dst[k] == name_byte(name, k);
*/
static void put_name(uint8_t *dst, const char *name)
{
    int ended = 0;
    int i;

    /*@ loop invariant 0 <= i <= 32;
        loop invariant ended == 0 || ended == 1;
        loop invariant ended == 1 <==> nul_within(name, i);
        loop invariant \forall integer k; 0 <= k < i ==> dst[k] == name_byte(name, k);
        loop assigns i, ended, dst[0 .. 31];
        loop variant 32 - i;
    */
    for (i = 0; i < 32; i++) {
        if (name[i] == 0)
            ended = 1;
        dst[i] = ended ? 0 : (uint8_t)(name[i] < 0 ? name[i] + 256 : name[i]);
    }
}

/*@ requires \valid(p + (0 .. 23)) && \valid_read(h) && \separated(p + (0 .. 23), h);
    assigns p[0 .. 23];
    ensures p[0] == 0x42 && p[1] == 0x41 && p[2] == 0x54 && p[3] == 0x4E;
    ensures p[4] == h->cmd && p[5] == h->flags;
    ensures LE16(p + 6) == h->status;
    ensures LE32(p + 8) == h->seq;
    ensures LE32(p + 12) == 0;
    ensures LE64(p + 16) == h->len;
*/
void baton_wire_encode_header(uint8_t *p, const struct baton_frame_header *h)
{
    p[0] = 'B';
    p[1] = 'A';
    p[2] = 'T';
    p[3] = 'N';
    p[4] = h->cmd;
    p[5] = h->flags;
    baton_wire_put_u16(p + 6, h->status);
    baton_wire_put_u32(p + 8, h->seq);
    baton_wire_put_u32(p + 12, 0);
    baton_wire_put_u64(p + 16, h->len);
}

/*@ requires \valid(p + (0 .. 47)) && \valid_read(h) && \separated(p + (0 .. 47), h);
    assigns p[0 .. 47];
    ensures LE16(p) == h->version_min && LE16(p + 2) == h->version_max;
    ensures p[4] == h->role && p[5] == 0 && p[6] == 0 && p[7] == 0;
    ensures LE64(p + 8) == h->features;
    ensures \forall integer k; 0 <= k < 32 ==> p[16 + k] == h->nonce[k];
*/
void baton_wire_encode_hello(uint8_t *p, const struct baton_hello *h)
{
    baton_wire_put_u16(p, h->version_min);
    baton_wire_put_u16(p + 2, h->version_max);
    p[4] = h->role;
    p[5] = 0;
    p[6] = 0;
    p[7] = 0;
    baton_wire_put_u64(p + 8, h->features);
    put_bytes(p + 16, h->nonce, sizeof h->nonce);
}

/*@ requires \valid(p + (0 .. 87)) && \valid_read(t) && \separated(p + (0 .. 87), t);
    assigns p[0 .. 87];
    ensures LE64(p) == t->buffer && LE64(p + 8) == t->offset;
    ensures LE32(p + 16) == t->type && LE32(p + 20) == 0;
    ensures LE64(p + 24) == t->ne[0] && LE64(p + 32) == t->ne[1] &&
            LE64(p + 40) == t->ne[2] && LE64(p + 48) == t->ne[3];
    ensures LE64(p + 56) == t->nb[0] && LE64(p + 64) == t->nb[1] &&
            LE64(p + 72) == t->nb[2] && LE64(p + 80) == t->nb[3];
*/
void baton_wire_encode_tensor(uint8_t *p, const struct baton_tensor_desc *t)
{
    baton_wire_put_u64(p, t->buffer);
    baton_wire_put_u64(p + 8, t->offset);
    baton_wire_put_u32(p + 16, t->type);
    baton_wire_put_u32(p + 20, 0);
    baton_wire_put_u64(p + 24, t->ne[0]);
    baton_wire_put_u64(p + 32, t->ne[1]);
    baton_wire_put_u64(p + 40, t->ne[2]);
    baton_wire_put_u64(p + 48, t->ne[3]);
    baton_wire_put_u64(p + 56, t->nb[0]);
    baton_wire_put_u64(p + 64, t->nb[1]);
    baton_wire_put_u64(p + 72, t->nb[2]);
    baton_wire_put_u64(p + 80, t->nb[3]);
}

/*@ requires \valid(p + (0 .. 103)) && \valid_read(n) && \separated(p + (0 .. 103), n);
    assigns p[0 .. 103];
    ensures LE32(p) == n->op && LE32(p + 4) == n->type;
    ensures LE64(p + 8) == n->ne[0] && LE64(p + 16) == n->ne[1] &&
            LE64(p + 24) == n->ne[2] && LE64(p + 32) == n->ne[3];
    ensures LE32(p + 40) == n->src[0] && LE32(p + 44) == n->src[1] &&
            LE32(p + 48) == n->src[2] && LE32(p + 52) == n->src[3] &&
            LE32(p + 56) == n->src[4] && LE32(p + 60) == n->src[5];
    ensures LE32(p + 64) == n->out_leaf;
    ensures LE32(p + 68) == n->params[0] && LE32(p + 72) == n->params[1] &&
            LE32(p + 76) == n->params[2] && LE32(p + 80) == n->params[3] &&
            LE32(p + 84) == n->params[4] && LE32(p + 88) == n->params[5] &&
            LE32(p + 92) == n->params[6] && LE32(p + 96) == n->params[7];
    ensures LE32(p + 100) == 0;
*/
void baton_wire_encode_node(uint8_t *p, const struct baton_graph_node *n)
{
    baton_wire_put_u32(p, n->op);
    baton_wire_put_u32(p + 4, n->type);
    baton_wire_put_u64(p + 8, n->ne[0]);
    baton_wire_put_u64(p + 16, n->ne[1]);
    baton_wire_put_u64(p + 24, n->ne[2]);
    baton_wire_put_u64(p + 32, n->ne[3]);
    baton_wire_put_u32(p + 40, n->src[0]);
    baton_wire_put_u32(p + 44, n->src[1]);
    baton_wire_put_u32(p + 48, n->src[2]);
    baton_wire_put_u32(p + 52, n->src[3]);
    baton_wire_put_u32(p + 56, n->src[4]);
    baton_wire_put_u32(p + 60, n->src[5]);
    baton_wire_put_u32(p + 64, n->out_leaf);
    baton_wire_put_u32(p + 68, n->params[0]);
    baton_wire_put_u32(p + 72, n->params[1]);
    baton_wire_put_u32(p + 76, n->params[2]);
    baton_wire_put_u32(p + 80, n->params[3]);
    baton_wire_put_u32(p + 84, n->params[4]);
    baton_wire_put_u32(p + 88, n->params[5]);
    baton_wire_put_u32(p + 92, n->params[6]);
    baton_wire_put_u32(p + 96, n->params[7]);
    baton_wire_put_u32(p + 100, 0);
}

/* The name is written up to its first NUL (at most 32 bytes), NUL-padded. */
/*@ requires \valid(p + (0 .. 95)) && \valid_read(d) && \separated(p + (0 .. 95), d);
    assigns p[0 .. 95];
    ensures LE64(p) == d->total_memory && LE64(p + 8) == d->free_memory;
    ensures LE64(p + 16) == d->alignment && LE64(p + 24) == d->max_buffer_bytes;
    ensures LE64(p + 32) == d->type_mask && LE64(p + 40) == d->op_mask;
    ensures LE32(p + 48) == d->n_threads && LE32(p + 52) == d->version;
    ensures \forall integer k; 0 <= k < 32 ==> p[56 + k] == name_byte(&d->name[0], k);
    ensures LE64(p + 88) == 0;
*/
void baton_wire_encode_device_info(uint8_t *p, const struct baton_device_info *d)
{
    baton_wire_put_u64(p, d->total_memory);
    baton_wire_put_u64(p + 8, d->free_memory);
    baton_wire_put_u64(p + 16, d->alignment);
    baton_wire_put_u64(p + 24, d->max_buffer_bytes);
    baton_wire_put_u64(p + 32, d->type_mask);
    baton_wire_put_u64(p + 40, d->op_mask);
    baton_wire_put_u32(p + 48, d->n_threads);
    baton_wire_put_u32(p + 52, d->version);
    baton_wire_put_u64(p + 88, 0);
    put_name(p + 56, d->name);
}

/*@ requires \valid(p + (0 .. 23)) && \valid_read(g) && \separated(p + (0 .. 23), g);
    assigns p[0 .. 23];
    ensures LE64(p) == g->handle && LE64(p + 8) == g->offset && LE64(p + 16) == g->length;
*/
void baton_wire_encode_grant_request(uint8_t *p, const struct baton_grant_request *g)
{
    baton_wire_put_u64(p, g->handle);
    baton_wire_put_u64(p + 8, g->offset);
    baton_wire_put_u64(p + 16, g->length);
}

/*@ requires \valid(p + (0 .. 47)) && \valid_read(d) && \separated(p + (0 .. 47), d);
    assigns p[0 .. 47];
    ensures p[0] == d->family && p[1] == 0;
    ensures LE16(p + 2) == d->port && LE32(p + 4) == 0;
    ensures \forall integer k; 0 <= k < 16 ==> p[8 + k] == d->addr[k];
    ensures \forall integer k; 0 <= k < 16 ==> p[24 + k] == d->grant[k];
    ensures LE64(p + 40) == d->grant_offset;
*/
void baton_wire_encode_peer_dest(uint8_t *p, const struct baton_peer_dest *d)
{
    p[0] = d->family;
    p[1] = 0;
    baton_wire_put_u16(p + 2, d->port);
    baton_wire_put_u32(p + 4, 0);
    baton_wire_put_u64(p + 40, d->grant_offset);
    put_bytes(p + 8, d->addr, 16);
    put_bytes(p + 24, d->grant, BATON_GRANT_ID_BYTES);
}

/*@ requires \valid(p + (0 .. 39)) && \valid_read(w) && \separated(p + (0 .. 39), w);
    assigns p[0 .. 39];
    ensures \forall integer k; 0 <= k < 16 ==> p[k] == w->grant[k];
    ensures LE64(p + 16) == w->offset && LE64(p + 24) == w->n && LE64(p + 32) == w->seq;
*/
void baton_wire_encode_peer_write(uint8_t *p, const struct baton_peer_write_header *w)
{
    baton_wire_put_u64(p + 16, w->offset);
    baton_wire_put_u64(p + 24, w->n);
    baton_wire_put_u64(p + 32, w->seq);
    put_bytes(p, w->grant, BATON_GRANT_ID_BYTES);
}

/*@ requires \valid(p + (0 .. 15)) && \valid_read(o) && \separated(p + (0 .. 15), o);
    assigns p[0 .. 15];
    ensures LE64(p) == o->seq && LE32(p + 8) == o->flags && LE32(p + 12) == 0;
*/
void baton_wire_encode_copy_options(uint8_t *p, const struct baton_copy_options *o)
{
    baton_wire_put_u64(p, o->seq);
    baton_wire_put_u32(p + 8, o->flags);
    baton_wire_put_u32(p + 12, 0);
}

/*@ requires \valid(p + (0 .. 31)) && \valid_read(f) && \separated(p + (0 .. 31), f);
    assigns p[0 .. 31];
    ensures \forall integer k; 0 <= k < 16 ==> p[k] == f->grant[k];
    ensures LE64(p + 16) == f->seq && LE32(p + 24) == f->status && LE32(p + 28) == 0;
*/
void baton_wire_encode_peer_fence(uint8_t *p, const struct baton_peer_fence *f)
{
    baton_wire_put_u64(p + 16, f->seq);
    baton_wire_put_u32(p + 24, f->status);
    baton_wire_put_u32(p + 28, 0);
    put_bytes(p, f->grant, BATON_GRANT_ID_BYTES);
}

/*@ requires \valid(p + (0 .. 7));
    assigns p[0 .. 7];
    ensures LE32(p) == id && LE32(p + 4) == 0;
*/
void baton_wire_encode_graph_id(uint8_t *p, uint32_t id)
{
    baton_wire_put_u32(p, id);
    baton_wire_put_u32(p + 4, 0);
}

/*@ requires \valid(p + (0 .. 15)) && \valid_read(h) && \separated(p + (0 .. 15), h);
    assigns p[0 .. 15];
    ensures LE32(p) == h->graph && LE32(p + 4) == h->flags;
    ensures LE32(p + 8) == h->n_fences && LE32(p + 12) == h->n_inputs;
*/
void baton_wire_encode_run_header(uint8_t *p, const struct baton_run_header *h)
{
    baton_wire_put_u32(p, h->graph);
    baton_wire_put_u32(p + 4, h->flags);
    baton_wire_put_u32(p + 8, h->n_fences);
    baton_wire_put_u32(p + 12, h->n_inputs);
}

/*@ requires \valid(p + (0 .. 31)) && \valid_read(f) && \separated(p + (0 .. 31), f);
    assigns p[0 .. 31];
    ensures \forall integer k; 0 <= k < 16 ==> p[k] == f->grant[k];
    ensures LE64(p + 16) == f->seq && LE64(p + 24) == 0;
*/
void baton_wire_encode_run_fence(uint8_t *p, const struct baton_run_fence *f)
{
    baton_wire_put_u64(p + 16, f->seq);
    baton_wire_put_u64(p + 24, 0);
    put_bytes(p, f->grant, BATON_GRANT_ID_BYTES);
}

/*@ requires \valid(p + (0 .. 23)) && \valid_read(h) && \separated(p + (0 .. 23), h);
    assigns p[0 .. 23];
    ensures LE32(p) == h->route && LE32(p + 4) == h->flags;
    ensures LE64(p + 8) == h->seq && LE64(p + 16) == h->n;
*/
void baton_wire_encode_run_handoff(uint8_t *p, const struct baton_run_handoff *h)
{
    baton_wire_put_u32(p, h->route);
    baton_wire_put_u32(p + 4, h->flags);
    baton_wire_put_u64(p + 8, h->seq);
    baton_wire_put_u64(p + 16, h->n);
}

/*@ requires \valid(p + (0 .. 7)) && \valid_read(r) && \separated(p + (0 .. 7), r);
    assigns p[0 .. 7];
    ensures LE32(p) == r->leaf && LE32(p + 4) == 0;
*/
void baton_wire_encode_run_return(uint8_t *p, const struct baton_run_return *r)
{
    baton_wire_put_u32(p, r->leaf);
    baton_wire_put_u32(p + 4, 0);
}

/* The u32 that stores v (two's complement), without an implementation-
 * defined conversion: v + 2^32 for a negative v. */
/*@ assigns \nothing;
    ensures \result == stored_u32(v);
*/
static uint32_t u32_of_i32(int32_t v)
{
    if (v < 0)
        return (uint32_t)(v + 2147483647 + 1) + 2147483648u;
    return (uint32_t)v;
}

/*@ requires \valid(p + (0 .. 15)) && \valid_read(in) && \separated(p + (0 .. 15), in);
    assigns p[0 .. 15];
    ensures LE32(p) == in->leaf && LE32(p + 4) == in->count;
    ensures LE32(p + 8) == stored_u32(in->first) && LE32(p + 12) == 0;
*/
void baton_wire_encode_run_input(uint8_t *p, const struct baton_run_input *in)
{
    baton_wire_put_u32(p, in->leaf);
    baton_wire_put_u32(p + 4, in->count);
    baton_wire_put_u32(p + 8, u32_of_i32(in->first));
    baton_wire_put_u32(p + 12, 0);
}

/*@ requires \valid(p + (0 .. 47)) && \valid_read(r) && \separated(p + (0 .. 47), r);
    assigns p[0 .. 47];
    ensures LE32(p) == r->result && LE32(p + 4) == r->status;
    ensures LE64(p + 8) == r->peer_bytes_sent && LE64(p + 16) == r->peer_bytes_received;
    ensures LE64(p + 24) == r->copies_done && LE64(p + 32) == r->copies_not_done;
    ensures LE64(p + 40) == 0;
*/
void baton_wire_encode_copy_result(uint8_t *p, const struct baton_copy_result *r)
{
    baton_wire_put_u32(p, r->result);
    baton_wire_put_u32(p + 4, r->status);
    baton_wire_put_u64(p + 8, r->peer_bytes_sent);
    baton_wire_put_u64(p + 16, r->peer_bytes_received);
    baton_wire_put_u64(p + 24, r->copies_done);
    baton_wire_put_u64(p + 32, r->copies_not_done);
    baton_wire_put_u64(p + 40, 0);
}

static const char *const cmd_names[BATON_CMD_LIMIT] = {
    [BATON_CMD_HELLO] = "HELLO",
    [BATON_CMD_AUTH] = "AUTH",
    [BATON_CMD_DEVICE_INFO] = "DEVICE_INFO",
    [BATON_CMD_ALLOC_BUFFER] = "ALLOC_BUFFER",
    [BATON_CMD_FREE_BUFFER] = "FREE_BUFFER",
    [BATON_CMD_BUFFER_CLEAR] = "BUFFER_CLEAR",
    [BATON_CMD_SET_TENSOR] = "SET_TENSOR",
    [BATON_CMD_GET_TENSOR] = "GET_TENSOR",
    [BATON_CMD_COPY_TENSOR] = "COPY_TENSOR",
    [BATON_CMD_GRAPH_COMPUTE] = "GRAPH_COMPUTE",
    [BATON_CMD_GRANT_WRITE] = "GRANT_WRITE",
    [BATON_CMD_REVOKE_GRANT] = "REVOKE_GRANT",
    [BATON_CMD_COPY_TENSOR_TO] = "COPY_TENSOR_TO",
    [BATON_CMD_PEER_WRITE] = "PEER_WRITE",
    [BATON_CMD_PEER_FENCE] = "PEER_FENCE",
    [BATON_CMD_GRAPH_REGISTER] = "GRAPH_REGISTER",
    [BATON_CMD_GRAPH_RUN] = "GRAPH_RUN",
    [BATON_CMD_GRAPH_FREE] = "GRAPH_FREE",
    [BATON_CMD_COPY_ROUTE] = "COPY_ROUTE",
};

/*@ assigns \nothing;
    ensures \valid_read(\result);
*/
const char *baton_cmd_name(uint32_t cmd)
{
    if (cmd < BATON_CMD_LIMIT && cmd_names[cmd] != NULL)
        return cmd_names[cmd];
    return "?";
}
