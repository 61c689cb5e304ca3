/* Wire decoders, bounds checks and encoders (docs/PROTOCOL.md).
 *
 * Decoders are pure C over (pointer, length): no I/O, no allocation, no libc,
 * no shifts; each has an ACSL contract in its .c file and is proven with
 * Frama-C WP (verify/). Every decoder takes a cursor *pos that advances only
 * on success; on failure the outputs may be partly written but *pos is
 * unchanged. All multi-byte fields are little-endian.
 *
 * Encoders write into a caller-provided buffer of sufficient, documented size;
 * they are pure too and proven the same way (encode.c).
 */
#ifndef BATON_WIRE_H
#define BATON_WIRE_H

#include <stddef.h>
#include <stdint.h>

#include "core/limits.h"
#include "core/tensor.h"

/* Commands (numbering is ours; docs/PROTOCOL.md) */
enum baton_cmd {
    BATON_CMD_HELLO = 1,
    BATON_CMD_AUTH = 2,
    BATON_CMD_DEVICE_INFO = 3,
    BATON_CMD_ALLOC_BUFFER = 4,
    BATON_CMD_FREE_BUFFER = 5,
    BATON_CMD_BUFFER_CLEAR = 6,
    BATON_CMD_SET_TENSOR = 7,
    BATON_CMD_GET_TENSOR = 8,
    BATON_CMD_COPY_TENSOR = 9,
    BATON_CMD_GRAPH_COMPUTE = 10,
    BATON_CMD_GRANT_WRITE = 11,
    BATON_CMD_REVOKE_GRANT = 12,
    BATON_CMD_COPY_TENSOR_TO = 13,
    BATON_CMD_PEER_WRITE = 14,
    BATON_CMD_PEER_FENCE = 15,
    BATON_CMD_GRAPH_REGISTER = 16,
    BATON_CMD_GRAPH_RUN = 17,
    BATON_CMD_GRAPH_FREE = 18,
    BATON_CMD_COPY_ROUTE = 19,
    BATON_CMD_LIMIT = 20 /* every valid command is below this */
};

enum baton_role { BATON_ROLE_SERVER = 0, BATON_ROLE_CLIENT = 1, BATON_ROLE_PEER = 2 };

/* Feature bits in HELLO (unknown bits are ignored). */
#define BATON_FEATURE_AUTH (1ull << 0)      /* responder requires AUTH */
#define BATON_FEATURE_PEER_COPY (1ull << 1) /* COPY_TENSOR_TO / PEER_WRITE */
#define BATON_FEATURE_ENCRYPT (1ull << 2)   /* responder: payloads encrypted after AUTH */
#define BATON_FEATURE_PIPELINE (1ull << 3)  /* GRAPH_REGISTER / GRAPH_RUN, fences, async copies */
#define BATON_FEATURE_OWNER_FENCE (1ull << 4) /* a grant owner's PEER_FENCE voids older writes */

/* Frame header: 24 bytes, both directions.
 *  0  u8[4] magic "BATN"
 *  4  u8    cmd
 *  5  u8    flags (0)
 *  6  u16   status (0 in requests; 0 or -baton_status in replies)
 *  8  u32   seq (chosen by the requester, echoed by the reply)
 * 12  u32   reserved (0)
 * 16  u64   payload length in bytes */
struct baton_frame_header {
    uint8_t cmd;
    uint8_t flags;
    uint16_t status;
    uint32_t seq;
    uint64_t len;
};

/* HELLO payload, 48 bytes, both directions.
 *  0 u16 version_min  2 u16 version_max (reply: both = chosen version)
 *  4 u8 role  5 u8[3] reserved (0)  8 u64 features  16 u8[32] nonce */
struct baton_hello {
    uint16_t version_min;
    uint16_t version_max;
    uint8_t role;
    uint64_t features;
    uint8_t nonce[32];
};

/* DEVICE_INFO reply payload, 96 bytes: u64 total_memory, u64 free_memory,
 * u64 alignment, u64 max_buffer_bytes, u64 type_mask (bit t = type id t
 * executable), u64 op_mask (bit o = op id o), u32 n_threads, u32 version,
 * u8[32] name (NUL-padded), u8[8] reserved (0; BATON_E_INVAL otherwise).
 * Offsets: 0, 8, 16, 24, 32, 40, 48, 52, 56, 88. */
struct baton_device_info {
    uint64_t total_memory;
    uint64_t free_memory;
    uint64_t alignment;
    uint64_t max_buffer_bytes;
    uint64_t type_mask;
    uint64_t op_mask;
    uint32_t n_threads;
    uint32_t version;
    char name[33]; /* decoded: NUL-terminated */
};
#define BATON_DEVICE_INFO_BYTES 96u

/* ---- proven primitives ---- */

/* 0 iff off <= size && n <= size - off (so off + n <= size, no wrap);
 * BATON_E_BOUNDS otherwise. */
int baton_wire_check_range(uint64_t off, uint64_t n, uint64_t size);

/* *out = a * b; BATON_E_OVERFLOW if the product exceeds 2^64 - 1. */
int baton_wire_mul_u64(uint64_t a, uint64_t b, uint64_t *out);

int baton_wire_get_u8(const uint8_t *buf, size_t len, size_t *pos, uint8_t *out);
int baton_wire_get_u16(const uint8_t *buf, size_t len, size_t *pos, uint16_t *out);
int baton_wire_get_u32(const uint8_t *buf, size_t len, size_t *pos, uint32_t *out);
int baton_wire_get_u64(const uint8_t *buf, size_t len, size_t *pos, uint64_t *out);

/* Decodes a 24-byte frame header. BATON_E_TRUNCATED if len - *pos < 24,
 * BATON_E_MAGIC on a bad magic, BATON_E_CMD if cmd is 0 or >= BATON_CMD_LIMIT,
 * BATON_E_INVAL if flags or reserved are non-zero, BATON_E_LIMIT if
 * payload length > max_len. */
int baton_wire_decode_header(const uint8_t *buf, size_t len, size_t *pos, uint64_t max_len,
                             struct baton_frame_header *out);

/* Decodes a 48-byte HELLO payload; BATON_E_INVAL on non-zero reserved bytes,
 * version_min > version_max or role > BATON_ROLE_PEER. */
int baton_wire_decode_hello(const uint8_t *buf, size_t len, size_t *pos, struct baton_hello *out);

/* Computes the byte extent of a contiguous tensor: checks the type id
 * (BATON_E_TYPE), each ne[i] <= BATON_MAX_DIM_ELEMS (BATON_E_LIMIT),
 * ne[0] % block_elems == 0 (BATON_E_SHAPE), nb equal to the contiguous
 * strides (BATON_E_SHAPE) and that every product fits in 64 bits
 * (BATON_E_OVERFLOW). On success *nbytes = nb[3] * ne[3] (0 if any ne is 0). */
int baton_wire_tensor_extent(uint32_t type, const uint64_t ne[4], const uint64_t nb[4],
                             uint64_t *nbytes);

/* Decodes an 88-byte tensor descriptor (u64 buffer, u64 offset, u32 type,
 * u32 reserved = 0, u64 ne[4], u64 nb[4]) and computes nbytes with
 * baton_wire_tensor_extent. Also checks offset + nbytes does not wrap. */
int baton_wire_decode_tensor(const uint8_t *buf, size_t len, size_t *pos,
                             struct baton_tensor_desc *out);

/* Decodes the graph header (u32 n_leaves, u32 n_nodes) and checks the counts
 * against the limits and against the remaining length: exactly
 * n_leaves * 88 + n_nodes * 104 bytes must follow (BATON_E_INVAL otherwise,
 * BATON_E_LIMIT above max_nodes / BATON_MAX_GRAPH_LEAVES). */
int baton_wire_decode_graph_header(const uint8_t *buf, size_t len, size_t *pos,
                                   uint32_t max_nodes, uint32_t *n_leaves, uint32_t *n_nodes);

/* Decodes one 104-byte graph node (node_index = its index among the nodes):
 *  0 u32 op  4 u32 type  8 u64 ne[4]  40 u32 src[6]  64 u32 out_leaf
 * 68 u32 params[8]  100 u32 reserved (0).
 * Checks: op id known (BATON_E_GRAPH); src[i] < n_leaves + node_index for
 * i < arity and src[i] == BATON_SRC_NONE for i >= arity (BATON_E_GRAPH);
 * out_leaf < n_leaves or BATON_SRC_NONE (BATON_E_GRAPH); type known
 * (BATON_E_TYPE). Shapes are checked later by the op validators. */
int baton_wire_decode_node(const uint8_t *buf, size_t len, size_t *pos, uint32_t n_leaves,
                           uint32_t node_index, struct baton_graph_node *out);

/* ---- direct path: grants, COPY_TENSOR_TO, PEER_WRITE (src/wire/peer.c) ----
 * docs/PROTOCOL.md "Direct path" has the byte layouts. */

#define BATON_GRANT_ID_BYTES 16u
#define BATON_GRANT_REQUEST_BYTES 24u    /* GRANT_WRITE request */
#define BATON_PEER_DEST_BYTES 48u        /* COPY_TENSOR_TO after its GET_TENSOR prefix */
#define BATON_COPY_OPTIONS_BYTES 16u     /* COPY_TENSOR_TO after its destination */
#define BATON_COPY_TO_BYTES                                                                        \
    (BATON_TENSOR_DESC_BYTES + 16u + BATON_PEER_DEST_BYTES + BATON_COPY_OPTIONS_BYTES) /* 168 */
#define BATON_COPY_RESULT_BYTES 48u      /* COPY_TENSOR_TO reply */
#define BATON_PEER_WRITE_HEADER_BYTES 40u /* PEER_WRITE, before its data */

/* Address families of a COPY_TENSOR_TO destination. */
#define BATON_PEER_FAMILY_NONE 0u /* no destination: a statistics query */
#define BATON_PEER_FAMILY_IPV4 4u
#define BATON_PEER_FAMILY_IPV6 6u

/* COPY_TENSOR_TO outcome (reply field `result`). Everything but DONE means
 * "not done": the coordinator copies through the hub path instead. */
enum baton_copy_outcome {
    BATON_COPY_DONE = 0,        /* PEER_WRITE's reply arrived: the bytes landed */
    BATON_COPY_NOT_ALLOWED = 1, /* destination not on the allow-list; nothing dialled */
    BATON_COPY_BACKOFF = 2,     /* destination in backoff after connect/handshake failures */
    BATON_COPY_UNREACHABLE = 3, /* connect failed or timed out */
    BATON_COPY_HANDSHAKE = 4,   /* HELLO/AUTH failed, or the destination lacks PEER_COPY */
    BATON_COPY_REFUSED = 5,     /* the destination refused the PEER_WRITE (grant) */
    BATON_COPY_IO = 6,          /* the link failed or timed out during the write */
    BATON_COPY_LIMIT = 7,       /* peer-link cap reached, or this server holds no peer key */
    BATON_COPY_QUEUED = 8,      /* asynchronous: handed to the link's sender (not an error);
                                   the destination's fence tells whether it landed */
    BATON_COPY_CANCELLED = 9,   /* this session's last GRAPH_RUN failed: no data sent, the
                                   destination is told the sequence number will not come */
    BATON_COPY_OUTCOME_LIMIT = 10 /* every valid outcome is below this */
};

/* COPY_TENSOR_TO options (16 bytes after the destination):
 *  0 u64 seq (the destination grant's sequence number this write completes;
 *    >= 1 for families 4 and 6, 0 for family 0)
 *  8 u32 flags (BATON_COPY_ASYNC; other bits 0)  12 u32 reserved (0). */
#define BATON_COPY_ASYNC 1u /* reply at once (BATON_COPY_QUEUED); the link's sender copies */
struct baton_copy_options {
    uint64_t seq;
    uint32_t flags;
};

/* GRANT_WRITE request: u64 handle, u64 offset, u64 length (24 bytes). */
struct baton_grant_request {
    uint64_t handle;
    uint64_t offset;
    uint64_t length;
};

/* COPY_TENSOR_TO destination (48 bytes after tensor, offset, n):
 *  0 u8 family (0, 4, 6)  1 u8 reserved (0)  2 u16 port  4 u32 reserved (0)
 *  8 u8[16] address (IPv4: 4 bytes, then 12 zero bytes)
 * 24 u8[16] grant id  40 u64 offset within the grant.
 * Family 0 (a statistics query) has every other field 0. */
struct baton_peer_dest {
    uint8_t family;
    uint16_t port;
    uint8_t addr[16];
    uint8_t grant[BATON_GRANT_ID_BYTES];
    uint64_t grant_offset;
};

/* PEER_WRITE header (40 bytes, then n data bytes):
 *  0 u8[16] grant id  16 u64 offset within the grant  24 u64 n
 * 32 u64 seq (>= 1: the grant's sequence number this write completes). */
struct baton_peer_write_header {
    uint8_t grant[BATON_GRANT_ID_BYTES];
    uint64_t offset;
    uint64_t n;
    uint64_t seq;
};

/* PEER_FENCE (peer role, 32 bytes): the source tells the destination that
 * the write with sequence number seq into the grant will not come.
 *  0 u8[16] grant id  16 u64 seq (>= 1)  24 u32 status (1..65535: the
 *  positive baton status why)  28 u32 reserved (0). */
#define BATON_PEER_FENCE_BYTES 32u
struct baton_peer_fence {
    uint8_t grant[BATON_GRANT_ID_BYTES];
    uint64_t seq;
    uint32_t status;
};

/* COPY_TENSOR_TO reply (48 bytes): u32 result (enum baton_copy_outcome),
 * u32 status (the positive baton status code that caused a "not done", or
 * 0), then this session's counters on that server since it connected:
 * u64 peer_bytes_sent, u64 peer_bytes_received (PEER_WRITE frame bytes:
 * header, payload, tag), u64 copies_done, u64 copies_not_done, and u64
 * reserved (0). */
struct baton_copy_result {
    uint32_t result;
    uint32_t status;
    uint64_t peer_bytes_sent;
    uint64_t peer_bytes_received;
    uint64_t copies_done;
    uint64_t copies_not_done;
};

/* Decodes a GRANT_WRITE request (24 bytes). BATON_E_TRUNCATED when fewer
 * bytes remain, BATON_E_INVAL for length 0, BATON_E_OVERFLOW when
 * offset + length exceeds 2^64 - 1. */
int baton_wire_decode_grant_request(const uint8_t *buf, size_t len, size_t *pos,
                                    struct baton_grant_request *out);

/* Decodes a 16-byte grant id (REVOKE_GRANT request, GRANT_WRITE reply).
 * BATON_E_INVAL for the all-zero id, which is never issued. */
int baton_wire_decode_grant_id(const uint8_t *buf, size_t len, size_t *pos,
                               uint8_t id[BATON_GRANT_ID_BYTES]);

/* Decodes a COPY_TENSOR_TO destination (48 bytes, layout above).
 * BATON_E_INVAL on non-zero reserved bytes, a family other than 0, 4, 6,
 * an IPv4 address with non-zero padding, port 0 or an all-zero grant id
 * for family 4 or 6, or any non-zero field for family 0. */
int baton_wire_decode_peer_dest(const uint8_t *buf, size_t len, size_t *pos,
                                struct baton_peer_dest *out);

/* Decodes a PEER_WRITE header (32 bytes). BATON_E_INVAL for an all-zero
 * grant id or n = 0. The range (offset, n) is checked against the grant by
 * the server with baton_wire_check_range. */
int baton_wire_decode_peer_write(const uint8_t *buf, size_t len, size_t *pos,
                                 struct baton_peer_write_header *out);

/* Decodes COPY_TENSOR_TO options (16 bytes, layout above) for a
 * destination of family `family` (0, 4 or 6, as decoded).
 * BATON_E_TRUNCATED when fewer bytes remain; BATON_E_INVAL for non-zero
 * reserved bytes, a flag other than BATON_COPY_ASYNC, family 0 with a
 * non-zero seq or flags, or a family 4/6 copy with seq 0. */
int baton_wire_decode_copy_options(const uint8_t *buf, size_t len, size_t *pos, uint8_t family,
                                   struct baton_copy_options *out);

/* Decodes a PEER_FENCE payload (32 bytes). BATON_E_INVAL for an all-zero
 * grant id, seq 0, status 0 or above 65535, or non-zero reserved bytes. */
int baton_wire_decode_peer_fence(const uint8_t *buf, size_t len, size_t *pos,
                                 struct baton_peer_fence *out);

/* ---- registered graphs: GRAPH_REGISTER, GRAPH_RUN, GRAPH_FREE
 * (src/wire/pipeline.c; docs/PROTOCOL.md "Registered graphs") ---- */

#define BATON_GRAPH_ID_BYTES 8u       /* u32 id (graph or route), u32 reserved (0) */
#define BATON_COPY_ROUTE_BYTES (BATON_TENSOR_DESC_BYTES + BATON_PEER_DEST_BYTES) /* 136 */
#define BATON_RUN_HEADER_BYTES 16u    /* GRAPH_RUN, before its fences and inputs */
#define BATON_RUN_FENCE_BYTES 32u
#define BATON_RUN_INPUT_BYTES 16u
#define BATON_RUN_HANDOFF_BYTES 24u
#define BATON_RUN_RETURN_BYTES 8u
#define BATON_MAX_RUN_FENCES 4u
#define BATON_MAX_RUN_INPUTS 4u
/* GRAPH_RUN flags */
#define BATON_RUN_RESET 1u   /* clear the session's failed-run latch first */
#define BATON_RUN_HANDOFF 2u /* a hand-off record follows the inputs */
#define BATON_RUN_RETURN 4u  /* a return record follows (after the hand-off) */
#define BATON_RUN_FLAGS_ALL 7u

/* GRAPH_RUN header: u32 graph id (>= 1), u32 flags (BATON_RUN_*; other
 * bits 0), u32 n_fences (<= 4), u32 n_inputs (<= 4); then n_fences fences,
 * n_inputs inputs, a hand-off (HANDOFF) and a return (RETURN). */
struct baton_run_header {
    uint32_t graph;
    uint32_t flags;
    uint32_t n_fences;
    uint32_t n_inputs;
};

/* A fence (32 bytes): u8[16] grant id, u64 seq (>= 1), u64 reserved (0):
 * the run waits until the grant holds exactly the write with this seq. */
struct baton_run_fence {
    uint8_t grant[BATON_GRANT_ID_BYTES];
    uint64_t seq;
};

/* An input (16 bytes): u32 leaf (index into the graph's leaves), u32 count
 * (>= 1), i32 first, u32 reserved (0): the leaf's first count I32 elements
 * become first, first + 1, ..., first + count - 1 (positions; one token
 * id, count 1) before the graph runs. */
struct baton_run_input {
    uint32_t leaf;
    uint32_t count;
    int32_t first;
};

/* A hand-off (24 bytes): u32 route (>= 1, COPY_ROUTE), u32 flags
 * (BATON_COPY_ASYNC; other bits 0), u64 seq (>= 1), u64 n (>= 1): after
 * the compute, the first n bytes of the route's tensor go to its
 * destination as the write seq (COPY_TENSOR_TO's semantics); a failed run
 * cancels seq there instead. */
struct baton_run_handoff {
    uint32_t route;
    uint32_t flags;
    uint64_t seq;
    uint64_t n;
};

/* A return (8 bytes): u32 leaf, u32 reserved (0): the leaf's bytes, after
 * the compute, make up the rest of the reply. */
struct baton_run_return {
    uint32_t leaf;
};

/* Decodes an id record (8 bytes: u32 id, u32 reserved): the GRAPH_REGISTER
 * and COPY_ROUTE replies and the GRAPH_FREE request. BATON_E_INVAL for id 0
 * or non-zero reserved bytes. */
int baton_wire_decode_graph_id(const uint8_t *buf, size_t len, size_t *pos, uint32_t *id);

/* Decodes a GRAPH_RUN header and checks the payload's length: exactly
 * 32 * n_fences + 16 * n_inputs (+ 24 with HANDOFF, + 8 with RETURN) bytes
 * must follow it (BATON_E_INVAL otherwise, and for graph id 0 or unknown
 * flags); n_fences or n_inputs above 4 is BATON_E_LIMIT. */
int baton_wire_decode_run_header(const uint8_t *buf, size_t len, size_t *pos,
                                 struct baton_run_header *out);

/* Decodes one fence (32 bytes). BATON_E_INVAL for an all-zero grant id,
 * seq 0 or non-zero reserved bytes. */
int baton_wire_decode_run_fence(const uint8_t *buf, size_t len, size_t *pos,
                                struct baton_run_fence *out);

/* Decodes one input (16 bytes). BATON_E_INVAL for count 0, non-zero
 * reserved bytes, or first + count - 1 above 2^31 - 1. */
int baton_wire_decode_run_input(const uint8_t *buf, size_t len, size_t *pos,
                                struct baton_run_input *out);

/* Decodes a hand-off (24 bytes). BATON_E_INVAL for route 0, a flag other
 * than BATON_COPY_ASYNC, seq 0 or n 0. */
int baton_wire_decode_run_handoff(const uint8_t *buf, size_t len, size_t *pos,
                                  struct baton_run_handoff *out);

/* Decodes a return (8 bytes). BATON_E_INVAL for non-zero reserved bytes. */
int baton_wire_decode_run_return(const uint8_t *buf, size_t len, size_t *pos,
                                 struct baton_run_return *out);

/* Decodes a COPY_TENSOR_TO reply (48 bytes). BATON_E_INVAL for a result
 * >= BATON_COPY_OUTCOME_LIMIT, a status above 65535, or non-zero reserved
 * bytes. */
int baton_wire_decode_copy_result(const uint8_t *buf, size_t len, size_t *pos,
                                  struct baton_copy_result *out);

/* ---- encoders (used by the client and the server's replies) ----
 * Proven like the decoders (encode.c, verify/PROVEN.md): each writes exactly
 * its record's bytes into p (valid for that many bytes, not overlapping the
 * input), and they read back as the input's fields with reserved bytes 0. */

/* The command's name ("SET_TENSOR"), or "?" for an id outside the table.
 * Static; never NULL. */
const char *baton_cmd_name(uint32_t cmd);

void baton_wire_put_u16(uint8_t *p, uint16_t v);
void baton_wire_put_u32(uint8_t *p, uint32_t v);
void baton_wire_put_u64(uint8_t *p, uint64_t v);
/* Writes 24 bytes. */
void baton_wire_encode_header(uint8_t *p, const struct baton_frame_header *h);
/* Writes 48 bytes. */
void baton_wire_encode_hello(uint8_t *p, const struct baton_hello *h);
/* Writes 88 bytes (nbytes is not on the wire). */
void baton_wire_encode_tensor(uint8_t *p, const struct baton_tensor_desc *t);
/* Writes 104 bytes. */
void baton_wire_encode_node(uint8_t *p, const struct baton_graph_node *n);
/* Writes/reads 96 bytes. */
void baton_wire_encode_device_info(uint8_t *p, const struct baton_device_info *d);
int baton_wire_decode_device_info(const uint8_t *buf, size_t len, size_t *pos,
                                  struct baton_device_info *out);

/* Direct path encoders: 24, 48, 16, 40, 32 and 48 bytes (layouts above). */
void baton_wire_encode_grant_request(uint8_t *p, const struct baton_grant_request *g);
void baton_wire_encode_peer_dest(uint8_t *p, const struct baton_peer_dest *d);
void baton_wire_encode_copy_options(uint8_t *p, const struct baton_copy_options *o);
void baton_wire_encode_peer_write(uint8_t *p, const struct baton_peer_write_header *w);
void baton_wire_encode_peer_fence(uint8_t *p, const struct baton_peer_fence *f);
void baton_wire_encode_copy_result(uint8_t *p, const struct baton_copy_result *r);
/* Registered graphs: 8, 16, 32 and 16 bytes (layouts above). */
void baton_wire_encode_graph_id(uint8_t *p, uint32_t id);
void baton_wire_encode_run_header(uint8_t *p, const struct baton_run_header *h);
void baton_wire_encode_run_fence(uint8_t *p, const struct baton_run_fence *f);
void baton_wire_encode_run_input(uint8_t *p, const struct baton_run_input *in);
void baton_wire_encode_run_handoff(uint8_t *p, const struct baton_run_handoff *h);
void baton_wire_encode_run_return(uint8_t *p, const struct baton_run_return *r);

/* Fills nb[] with the contiguous strides of (type, ne). Returns 0, or
 * BATON_E_TYPE / BATON_E_SHAPE / BATON_E_OVERFLOW as baton_wire_tensor_extent. */
int baton_tensor_contiguous_nb(uint32_t type, const uint64_t ne[4], uint64_t nb[4]);

#endif
