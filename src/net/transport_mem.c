/* In-memory transport (transport.h) for fuzz harnesses and tests. */
#include <stdlib.h>
#include <string.h>

#include "baton/status.h"
#include "net/transport.h"

struct mem_transport {
    struct baton_transport base; /* first: the vtable pointer */
    const uint8_t *in;
    size_t in_len, in_pos;
    uint8_t *sink;
    size_t sink_cap, sink_len, sink_alloc;
    uint64_t written;
};

static struct mem_transport *as_mem(struct baton_transport *t)
{
    return (struct mem_transport *)t;
}

static int mem_wait_readable(struct baton_transport *t, uint64_t deadline)
{
    struct mem_transport *m = as_mem(t);
    return m->in_pos < m->in_len ? 0 : BATON_E_IO;
}

static int mem_recv_exact(struct baton_transport *t, void *buf, size_t n, uint64_t deadline)
{
    struct mem_transport *m = as_mem(t);
    size_t avail = m->in_len - m->in_pos;
    size_t k = n < avail ? n : avail;
    if (k > 0)
        memcpy(buf, m->in + m->in_pos, k);
    m->in_pos += k;
    return k == n ? 0 : BATON_E_IO;
}

/* Keeps up to sink_cap bytes, growing the sink geometrically. */
static void sink_put(struct mem_transport *m, const uint8_t *p, size_t n)
{
    m->written += n;
    if (n == 0 || m->sink_len >= m->sink_cap)
        return;
    size_t room = m->sink_cap - m->sink_len;
    size_t k = n < room ? n : room;
    size_t need = m->sink_len + k; /* <= sink_cap */
    if (need > m->sink_alloc) {
        size_t want = m->sink_alloc ? m->sink_alloc : 4096;
        while (want < need && want <= m->sink_cap / 2)
            want *= 2;
        if (want < need || want > m->sink_cap)
            want = m->sink_cap;
        uint8_t *ns = realloc(m->sink, want);
        if (!ns) {
            m->sink_cap = m->sink_len; /* keep what we have; count the rest */
            return;
        }
        m->sink = ns;
        m->sink_alloc = want;
    }
    memcpy(m->sink + m->sink_len, p, k);
    m->sink_len += k;
}

static int mem_send_all(struct baton_transport *t, const struct iovec *iov, int iovcnt,
                        uint64_t deadline)
{
    struct mem_transport *m = as_mem(t);
    if (iovcnt < 0 || iovcnt > BATON_TRANSPORT_MAX_IOV)
        return BATON_E_INVAL;
    for (int i = 0; i < iovcnt; i++)
        sink_put(m, iov[i].iov_base, iov[i].iov_len);
    return 0;
}

static void mem_close(struct baton_transport *t)
{
    struct mem_transport *m = as_mem(t);
    free(m->sink);
    free(m);
}

static const struct baton_transport_ops mem_ops = {
    .wait_readable = mem_wait_readable,
    .recv_exact = mem_recv_exact,
    .send_all = mem_send_all,
    .close = mem_close,
};

int baton_transport_mem(const uint8_t *in, size_t in_len, size_t sink_cap,
                        struct baton_transport **out)
{
    struct mem_transport *m = calloc(1, sizeof *m);
    if (!m)
        return BATON_E_NOMEM;
    m->base.ops = &mem_ops;
    m->in = in;
    m->in_len = in ? in_len : 0;
    m->sink_cap = sink_cap;
    *out = &m->base;
    return 0;
}

const uint8_t *baton_transport_mem_output(const struct baton_transport *t, size_t *len)
{
    const struct mem_transport *m = (const struct mem_transport *)t;
    *len = m->sink_len;
    return m->sink;
}

uint64_t baton_transport_mem_written(const struct baton_transport *t)
{
    return ((const struct mem_transport *)t)->written;
}
