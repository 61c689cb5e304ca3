/* Hard wire limits: every limit the decoders check, in one place.
 * Policy (issue 3) may lower the configurable ones; none may be raised past
 * these compile-time ceilings. */
#ifndef BATON_CORE_LIMITS_H
#define BATON_CORE_LIMITS_H

#define BATON_PROTOCOL_VERSION 1u
#define BATON_DEFAULT_PORT 7340

#define BATON_FRAME_HEADER_BYTES 24u
#define BATON_HELLO_BYTES 48u
#define BATON_TENSOR_DESC_BYTES 88u
#define BATON_GRAPH_HEADER_BYTES 8u
#define BATON_GRAPH_NODE_BYTES 104u

#define BATON_MAX_MESSAGE_BYTES (1ull << 32) /* 4 GiB ceiling for one payload */
#define BATON_MAX_GRAPH_NODES 16384u
#define BATON_MAX_GRAPH_LEAVES 16384u
/* the server's defaults for its policy's max_graph_nodes and max_graph_flops
 * (src/server/policy.h), which a coordinator names when a graph is refused */
#define BATON_DEFAULT_MAX_GRAPH_NODES 8192u
#define BATON_DEFAULT_MAX_GRAPH_FLOPS 50000000000000ull /* 5 x 10^13 */
#define BATON_MAX_DIM_ELEMS (1ull << 40) /* per dimension */
#define BATON_MAX_BUFFERS 4096u          /* server-wide handle table size */
#define BATON_BUFFER_ALIGN 64u
/* batond's scratch arena of one session (graph intermediates and work
 * areas): its default max_scratch_bytes, not a policy key, lowered to the
 * total memory where that is less (SECURITY.md) */
#define BATON_SCRATCH_LIMIT_BYTES (1ull << 30)

#endif
