/* Fuzz target client_replies: a malicious server against libbaton.
 *
 * Input:
 *   byte 0          number of client calls, (b % 16) + 1
 *   next n bytes    the calls: low nibble = which call, high nibble = its
 *                   parameter (sizes, handle slot, pipeline depth)
 *   the rest        everything "the server" sends, starting with its HELLO
 *                   reply (at most STREAM_MAX bytes are used)
 *
 * The server bytes are written into one end of an AF_UNIX socketpair, which
 * is then shut down for writing (EOF after them); libbaton adopts the other
 * end (baton_conn_adopt_fd) and performs HELLO and the calls, in order, on
 * the calling thread. Nothing reads the client's requests: they are small
 * and stay queued in the socket. The client's sequence numbers are 1, 2, ...
 * (one per request), which the seeds in fuzz/corpus/client_replies follow.
 *
 * The reply decoders on their own (baton_wire_decode_device_info at every
 * cursor, with its round trip) run over the raw bytes first.
 *
 * Properties: no memory error (every GET destination is an exact-size heap
 * block); every call returns 0 or a negative status; once the connection
 * is dead, every later call fails and it stays dead; a successful
 * DEVICE_INFO has a NUL-terminated name.
 */
#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include "fuzz_common.h"

#include "baton/client.h"
#include "baton/status.h"
#include "wire/wire.h"

#define STREAM_MAX (32u * 1024u)
#define TIMEOUT_MS 2000
#define MAX_HANDLES 4

static void check_device_info(const uint8_t *buf, size_t size, size_t at)
{
    struct baton_device_info d;
    size_t pos = at;
    int rc = baton_wire_decode_device_info(buf, size, &pos, &d);
    if (at > size || size - at < BATON_DEVICE_INFO_BYTES) {
        FUZZ_CHECK(rc == BATON_E_TRUNCATED && pos == at, "short device info: %d", rc);
        return;
    }
    const uint8_t *p = buf + at;
    int reserved_zero = fuzz_le(p + 88, 8) == 0;
    FUZZ_CHECK(reserved_zero ? rc == 0 : rc == BATON_E_INVAL, "device info rc %d", rc);
    if (rc != 0) {
        FUZZ_CHECK(pos == at, "cursor moved on failure");
        return;
    }
    FUZZ_CHECK(pos == at + BATON_DEVICE_INFO_BYTES, "cursor");
    FUZZ_CHECK(d.name[32] == 0 && d.total_memory == fuzz_le(p, 8) &&
                   d.op_mask == fuzz_le(p + 40, 8) && d.version == fuzz_le(p + 52, 4),
               "device info fields");
    /* the encoder writes the name up to its first NUL: the round trip is
     * exact when nothing follows that NUL */
    size_t nl = strnlen((const char *)p + 56, 32);
    int clean = 1;
    for (size_t i = nl; i < 32; i++)
        clean &= p[56 + i] == 0;
    if (clean) {
        uint8_t enc[BATON_DEVICE_INFO_BYTES];
        baton_wire_encode_device_info(enc, &d);
        FUZZ_CHECK(memcmp(enc, p, sizeof enc) == 0, "device info encode(decode(x)) != x");
    }
}

struct client_run {
    struct baton_conn *c;
    uint64_t handles[MAX_HANDLES];
    uint32_t n_handles;
    int was_dead;
};

/* A small F32 tensor in buffer `handle`: 16 << (p & 3) elements. */
static void small_tensor(struct baton_tensor_desc *t, uint64_t handle, unsigned p)
{
    if (baton_tensor_init(t, handle, 64u * (p >> 2), BATON_TYPE_F32, 16u << (p & 3), 1, 1, 1) != 0)
        abort();
}

static uint64_t pick_handle(const struct client_run *r, unsigned p)
{
    if (r->n_handles == 0 || p >= 8)
        return ((uint64_t)1 << 32) | p;
    return r->handles[p % r->n_handles];
}

static int get_into_heap(struct client_run *r, const struct baton_tensor_desc *t, int submit_only,
                         uint8_t **keep)
{
    uint8_t *dst = malloc((size_t)t->nbytes);
    if (!dst)
        abort();
    int rc = submit_only ? baton_submit_get_tensor(r->c, t, 0, dst, t->nbytes)
                         : baton_get_tensor(r->c, t, 0, dst, t->nbytes);
    if (keep)
        *keep = dst; /* freed after the wait that fills it */
    else
        free(dst);
    return rc;
}

static int one_call(struct client_run *r, uint8_t op)
{
    static const uint8_t payload[4096];
    unsigned p = op >> 4;
    struct baton_tensor_desc t, t2;
    uint64_t h = pick_handle(r, p);
    int rc = 0;

    switch (op & 15) {
    case 0:
    default: {
        struct baton_device_info d;
        rc = baton_device_info(r->c, &d);
        if (rc == 0)
            FUZZ_CHECK(memchr(d.name, 0, sizeof d.name) != NULL, "device name not terminated");
        break;
    }
    case 1: {
        uint64_t handle = 0;
        rc = baton_alloc_buffer(r->c, 64u << p, &handle);
        if (rc == 0 && r->n_handles < MAX_HANDLES)
            r->handles[r->n_handles++] = handle;
        break;
    }
    case 2:
        rc = baton_free_buffer(r->c, h);
        break;
    case 3:
        rc = baton_buffer_clear(r->c, h, (uint8_t)p);
        break;
    case 4:
        small_tensor(&t, h, p);
        rc = baton_set_tensor(r->c, &t, 0, payload, t.nbytes);
        break;
    case 5:
        small_tensor(&t, h, p);
        rc = get_into_heap(r, &t, 0, NULL);
        break;
    case 6:
        small_tensor(&t, h, p);
        small_tensor(&t2, pick_handle(r, p + 1), p);
        rc = baton_copy_tensor(r->c, &t, &t2);
        break;
    case 7:
    case 8: {
        /* one SCALE node from leaf 0 into leaf 1; with op 8 pipelined with
         * a GET of the result */
        struct baton_tensor_desc leaves[2];
        struct baton_graph_node node;
        small_tensor(&leaves[0], h, p);
        small_tensor(&leaves[1], h, p);
        leaves[1].offset += leaves[0].nbytes;
        memset(&node, 0, sizeof node);
        node.op = BATON_OP_SCALE;
        node.type = BATON_TYPE_F32;
        memcpy(node.ne, leaves[0].ne, sizeof node.ne);
        for (int i = 0; i < BATON_MAX_SRC; i++)
            node.src[i] = BATON_SRC_NONE;
        node.src[0] = 0;
        node.out_leaf = 1;
        node.params[0] = 0x3f800000u; /* 1.0f */
        struct baton_graph g = {2, 1, leaves, &node};
        if ((op & 15) == 7) {
            rc = baton_graph_compute(r->c, &g);
        } else {
            uint8_t *dst = NULL;
            rc = baton_submit_graph_compute(r->c, &g);
            if (rc == 0)
                rc = get_into_heap(r, &leaves[1], 1, &dst);
            int wrc = baton_conn_wait(r->c);
            free(dst);
            if (rc == 0)
                rc = wrc;
        }
        break;
    }
    case 9: {
        /* pipeline: (p % 4) + 1 GETs, one SET, then wait for all */
        uint8_t *dst[4] = {NULL, NULL, NULL, NULL};
        unsigned depth = p % 4 + 1;
        for (unsigned i = 0; i < depth && rc == 0; i++) {
            small_tensor(&t, h, p + i);
            rc = get_into_heap(r, &t, 1, &dst[i]);
        }
        if (rc == 0) {
            small_tensor(&t, h, p);
            rc = baton_submit_set_tensor(r->c, &t, 0, payload, t.nbytes);
        }
        int wrc = baton_conn_wait(r->c);
        for (unsigned i = 0; i < 4; i++)
            free(dst[i]);
        if (rc == 0)
            rc = wrc;
        break;
    }
    case 10:
        rc = baton_conn_wait(r->c);
        break;
    case 11: {
        struct baton_cmd_stats st = baton_conn_stats(r->c, p);
        FUZZ_CHECK(p != 0 || (st.count == 0 && st.request_bytes == 0), "stats of cmd 0");
        break;
    }
    }
    return rc;
}

static void run_client(const uint8_t *calls, size_t n_calls, const uint8_t *stream, size_t len)
{
    int sv[2];
    struct client_run r;
    memset(&r, 0, sizeof r);
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0)
        abort();
    /* queue everything the server says, then EOF */
    int fl = fcntl(sv[0], F_GETFL);
    fcntl(sv[0], F_SETFL, fl | O_NONBLOCK);
    size_t off = 0;
    while (off < len) {
        ssize_t k = write(sv[0], stream + off, len - off);
        if (k <= 0)
            break; /* socket buffer full: the rest is cut off */
        off += (size_t)k;
    }
    shutdown(sv[0], SHUT_WR);

    int rc = baton_conn_adopt_fd(sv[1], TIMEOUT_MS, &r.c);
    FUZZ_CHECK(rc <= 0, "adopt rc %d", rc);
    if (rc != 0) {
        close(sv[0]);
        return;
    }
    for (size_t i = 0; i < n_calls; i++) {
        rc = one_call(&r, calls[i]);
        FUZZ_CHECK(rc <= 0, "call %zu rc %d", i, rc);
        int dead = baton_conn_is_dead(r.c);
        FUZZ_CHECK(!r.was_dead || dead, "a dead connection came back");
        if (r.was_dead && (calls[i] & 15) <= 10)
            FUZZ_CHECK(rc != 0, "call %zu on a dead connection succeeded", i);
        r.was_dead = dead;
    }
    baton_conn_close(r.c);
    close(sv[0]);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    uint8_t *buf = fuzz_dup(data, size);
    for (size_t at = 0; at <= size && at < 2048; at++)
        check_device_info(buf, size, at);

    if (size >= 1) {
        size_t n_calls = buf[0] % 16u + 1;
        if (n_calls > size - 1)
            n_calls = size - 1;
        const uint8_t *stream = buf + 1 + n_calls;
        size_t len = size - 1 - n_calls;
        if (len > STREAM_MAX)
            len = STREAM_MAX;
        run_client(buf + 1, n_calls, stream, len);
    }
    free(buf);
    return 0;
}
