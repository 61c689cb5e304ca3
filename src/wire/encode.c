/* Wire encoders (wire.h, docs/PROTOCOL.md). Not part of the proven set: they
 * write fixed-size records from host values into caller buffers of the
 * documented size, and the unit tests check them byte-exact against the
 * proven decoders. */
#include <stdint.h>
#include <string.h>

#include "wire/wire.h"

void baton_wire_put_u16(uint8_t *p, uint16_t v)
{
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
}

void baton_wire_put_u32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

void baton_wire_put_u64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

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

void baton_wire_encode_hello(uint8_t *p, const struct baton_hello *h)
{
    baton_wire_put_u16(p, h->version_min);
    baton_wire_put_u16(p + 2, h->version_max);
    p[4] = h->role;
    p[5] = p[6] = p[7] = 0;
    baton_wire_put_u64(p + 8, h->features);
    memcpy(p + 16, h->nonce, sizeof h->nonce);
}

void baton_wire_encode_tensor(uint8_t *p, const struct baton_tensor_desc *t)
{
    baton_wire_put_u64(p, t->buffer);
    baton_wire_put_u64(p + 8, t->offset);
    baton_wire_put_u32(p + 16, t->type);
    baton_wire_put_u32(p + 20, 0);
    for (int i = 0; i < BATON_MAX_DIMS; i++) {
        baton_wire_put_u64(p + 24 + 8 * i, t->ne[i]);
        baton_wire_put_u64(p + 56 + 8 * i, t->nb[i]);
    }
}

void baton_wire_encode_node(uint8_t *p, const struct baton_graph_node *n)
{
    baton_wire_put_u32(p, n->op);
    baton_wire_put_u32(p + 4, n->type);
    for (int i = 0; i < BATON_MAX_DIMS; i++)
        baton_wire_put_u64(p + 8 + 8 * i, n->ne[i]);
    for (int i = 0; i < BATON_MAX_SRC; i++)
        baton_wire_put_u32(p + 40 + 4 * i, n->src[i]);
    baton_wire_put_u32(p + 64, n->out_leaf);
    for (int i = 0; i < BATON_N_PARAMS; i++)
        baton_wire_put_u32(p + 68 + 4 * i, n->params[i]);
    baton_wire_put_u32(p + 100, 0);
}

/* The name is written up to its first NUL (at most 32 bytes), NUL-padded. */
void baton_wire_encode_device_info(uint8_t *p, const struct baton_device_info *d)
{
    size_t n = strnlen(d->name, 32);

    baton_wire_put_u64(p, d->total_memory);
    baton_wire_put_u64(p + 8, d->free_memory);
    baton_wire_put_u64(p + 16, d->alignment);
    baton_wire_put_u64(p + 24, d->max_buffer_bytes);
    baton_wire_put_u64(p + 32, d->type_mask);
    baton_wire_put_u64(p + 40, d->op_mask);
    baton_wire_put_u32(p + 48, d->n_threads);
    baton_wire_put_u32(p + 52, d->version);
    memset(p + 56, 0, 40); /* name padding and the 8 reserved bytes */
    memcpy(p + 56, d->name, n);
}

void baton_wire_encode_grant_request(uint8_t *p, const struct baton_grant_request *g)
{
    baton_wire_put_u64(p, g->handle);
    baton_wire_put_u64(p + 8, g->offset);
    baton_wire_put_u64(p + 16, g->length);
}

void baton_wire_encode_peer_dest(uint8_t *p, const struct baton_peer_dest *d)
{
    memset(p, 0, BATON_PEER_DEST_BYTES);
    p[0] = d->family;
    baton_wire_put_u16(p + 2, d->port);
    memcpy(p + 8, d->addr, 16);
    memcpy(p + 24, d->grant, BATON_GRANT_ID_BYTES);
    baton_wire_put_u64(p + 40, d->grant_offset);
}

void baton_wire_encode_peer_write(uint8_t *p, const struct baton_peer_write_header *w)
{
    memcpy(p, w->grant, BATON_GRANT_ID_BYTES);
    baton_wire_put_u64(p + 16, w->offset);
    baton_wire_put_u64(p + 24, w->n);
    baton_wire_put_u64(p + 32, w->seq);
}

void baton_wire_encode_copy_options(uint8_t *p, const struct baton_copy_options *o)
{
    baton_wire_put_u64(p, o->seq);
    baton_wire_put_u32(p + 8, o->flags);
    baton_wire_put_u32(p + 12, 0);
}

void baton_wire_encode_peer_fence(uint8_t *p, const struct baton_peer_fence *f)
{
    memcpy(p, f->grant, BATON_GRANT_ID_BYTES);
    baton_wire_put_u64(p + 16, f->seq);
    baton_wire_put_u32(p + 24, f->status);
    baton_wire_put_u32(p + 28, 0);
}

void baton_wire_encode_graph_id(uint8_t *p, uint32_t id)
{
    baton_wire_put_u32(p, id);
    baton_wire_put_u32(p + 4, 0);
}

void baton_wire_encode_run_header(uint8_t *p, const struct baton_run_header *h)
{
    baton_wire_put_u32(p, h->graph);
    baton_wire_put_u32(p + 4, h->flags);
    baton_wire_put_u32(p + 8, h->n_fences);
    baton_wire_put_u32(p + 12, h->n_inputs);
}

void baton_wire_encode_run_fence(uint8_t *p, const struct baton_run_fence *f)
{
    memcpy(p, f->grant, BATON_GRANT_ID_BYTES);
    baton_wire_put_u64(p + 16, f->seq);
    baton_wire_put_u64(p + 24, 0);
}

void baton_wire_encode_run_handoff(uint8_t *p, const struct baton_run_handoff *h)
{
    baton_wire_put_u32(p, h->route);
    baton_wire_put_u32(p + 4, h->flags);
    baton_wire_put_u64(p + 8, h->seq);
    baton_wire_put_u64(p + 16, h->n);
}

void baton_wire_encode_run_return(uint8_t *p, const struct baton_run_return *r)
{
    baton_wire_put_u32(p, r->leaf);
    baton_wire_put_u32(p + 4, 0);
}

void baton_wire_encode_run_input(uint8_t *p, const struct baton_run_input *in)
{
    baton_wire_put_u32(p, in->leaf);
    baton_wire_put_u32(p + 4, in->count);
    baton_wire_put_u32(p + 8, (uint32_t)in->first);
    baton_wire_put_u32(p + 12, 0);
}

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

const char *baton_cmd_name(uint32_t cmd)
{
    return cmd < BATON_CMD_LIMIT && cmd_names[cmd] ? cmd_names[cmd] : "?";
}
