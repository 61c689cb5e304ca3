/* Outbound peer links and the transfer of COPY_TENSOR_TO
 * (server_internal.h; DESIGN.md "Peers"; docs/PROTOCOL.md "Direct path").
 *
 * A link is an initiator connection of libbaton (src/client) opened with
 * the peer role and the peer key, so it goes through the same HELLO + AUTH
 * handshake and carries the same frame tags as a coordinator's connection.
 * Links belong to the session that asked for them, keyed by destination
 * (address, port), and are closed when that session ends; so a link, its
 * descriptor and its state live exactly as long as their session, and no
 * thread is ever started for them: the transfer runs on the session's own
 * connection thread, under deadlines.
 *
 * Only destinations on the allow-list (cfg.peers, exact binary address and
 * port, resolved at start) are dialled, by binary address: no name
 * resolution happens after start. The backoff table has one entry per
 * allow-list entry (so it is server-wide, keyed by address:port, and
 * bounded); only connect and handshake failures enter it.
 */
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "auth/auth.h"
#include "baton/client.h"
#include "baton/status.h"
#include "net/net.h"
#include "server/server_internal.h"

struct peer_link {
    struct baton_peer_addr dest;
    struct baton_conn *conn;
};

#define BACKOFF_FIRST_MS 1000u

const char *server_copy_outcome_name(uint32_t outcome)
{
    static const char *const names[BATON_COPY_OUTCOME_LIMIT] = {
        [BATON_COPY_DONE] = "done",
        [BATON_COPY_NOT_ALLOWED] = "destination not on the allow-list",
        [BATON_COPY_BACKOFF] = "destination in backoff",
        [BATON_COPY_UNREACHABLE] = "connect failed",
        [BATON_COPY_HANDSHAKE] = "handshake failed",
        [BATON_COPY_REFUSED] = "refused by the destination",
        [BATON_COPY_IO] = "link failed",
        [BATON_COPY_LIMIT] = "no peer link available",
    };
    return outcome < BATON_COPY_OUTCOME_LIMIT ? names[outcome] : "?";
}

/* Index of the allow-list entry that dest matches exactly, or -1. */
static int allow_index(const struct baton_server_config *cfg, const struct baton_peer_dest *d)
{
    for (uint32_t i = 0; i < cfg->n_peers && i < BATON_SERVER_MAX_PEERS; i++) {
        const struct baton_peer_addr *a = &cfg->peers[i];
        if (a->family == d->family && a->port == d->port && memcmp(a->addr, d->addr, 16) == 0)
            return (int)i;
    }
    return -1;
}

/* ---- backoff (server-wide, per allow-list entry) ---- */

static int backoff_active(struct baton_server *s, int idx)
{
    pthread_mutex_lock(&s->peer_lock);
    int active = s->backoff[idx].fails > 0 && baton_net_now_ns() < s->backoff[idx].until_ns;
    pthread_mutex_unlock(&s->peer_lock);
    return active;
}

uint64_t server_backoff_delay_ms(uint32_t fails, uint64_t cap_ms)
{
    uint64_t delay = BACKOFF_FIRST_MS;
    for (uint32_t i = 1; i < fails && delay < cap_ms; i++)
        delay *= 2;
    return delay < cap_ms ? delay : cap_ms;
}

/* A connect or handshake failure: the next dial waits 1 s, 2 s, 4 s ...
 * up to peer_backoff_max_ms. */
static void backoff_fail(struct baton_server *s, int idx)
{
    pthread_mutex_lock(&s->peer_lock);
    struct peer_backoff *b = &s->backoff[idx];
    if (b->fails < UINT32_MAX)
        b->fails++;
    uint64_t delay = server_backoff_delay_ms(b->fails, (uint64_t)s->cfg.peer_backoff_max_ms);
    b->until_ns = baton_net_now_ns() + delay * 1000000ull;
    pthread_mutex_unlock(&s->peer_lock);
}

static void backoff_clear(struct baton_server *s, int idx)
{
    pthread_mutex_lock(&s->peer_lock);
    s->backoff[idx].fails = 0;
    s->backoff[idx].until_ns = 0;
    pthread_mutex_unlock(&s->peer_lock);
}

/* ---- link slots (max_peer_links, all sessions) ---- */

static int link_reserve(struct baton_server *s)
{
    int rc = 0;
    pthread_mutex_lock(&s->peer_lock);
    if (s->n_links >= s->cfg.max_peer_links)
        rc = BATON_E_LIMIT;
    else
        s->n_links++;
    pthread_mutex_unlock(&s->peer_lock);
    return rc;
}

static void link_unreserve(struct baton_server *s)
{
    pthread_mutex_lock(&s->peer_lock);
    if (s->n_links > 0)
        s->n_links--;
    pthread_mutex_unlock(&s->peer_lock);
}

/* Closes link i of sess and frees its slot (the array keeps no holes). */
static void link_close(struct baton_server *s, struct baton_session *sess, uint32_t i)
{
    baton_conn_close(sess->links[i].conn);
    link_unreserve(s);
    sess->links[i] = sess->links[--sess->n_links];
}

void server_peer_links_close(struct baton_server *s, struct baton_session *sess)
{
    while (sess->n_links > 0)
        link_close(s, sess, sess->n_links - 1);
    free(sess->links);
    sess->links = NULL;
    sess->links_cap = 0;
}

/* Opens a link to allow-list entry idx: connect, HELLO + AUTH with the peer
 * key in the peer role, each under peer_timeout_ms; the destination must
 * advertise PEER_COPY. Returns BATON_COPY_DONE with *out, or the outcome
 * and *status. */
static uint32_t dial(struct baton_server *s, int idx, struct baton_conn **out, int *status)
{
    const struct baton_peer_addr *a = &s->cfg.peers[idx];
    struct sockaddr_storage ss;
    unsigned sl;
    int fd = -1, rc;

    if (!s->cfg.peer_key) {
        *status = BATON_E_AUTH; /* no key to prove: this server cannot dial peers */
        return BATON_COPY_LIMIT;
    }
    if (backoff_active(s, idx))
        return BATON_COPY_BACKOFF;
    if (link_reserve(s) != 0) {
        *status = BATON_E_LIMIT;
        return BATON_COPY_LIMIT;
    }
    memset(&ss, 0, sizeof ss);
    if (a->family == BATON_PEER_FAMILY_IPV4) {
        struct sockaddr_in *in = (struct sockaddr_in *)&ss;
        in->sin_family = AF_INET;
        in->sin_port = htons(a->port);
        memcpy(&in->sin_addr, a->addr, 4);
        sl = sizeof *in;
    } else {
        struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)&ss;
        in6->sin6_family = AF_INET6;
        in6->sin6_port = htons(a->port);
        memcpy(&in6->sin6_addr, a->addr, 16);
        sl = sizeof *in6;
    }
    rc = baton_net_connect_addr((const struct sockaddr *)&ss, sl, s->cfg.peer_timeout_ms, &fd);
    if (rc != 0) {
        backoff_fail(s, idx);
        link_unreserve(s);
        *status = rc;
        return BATON_COPY_UNREACHABLE;
    }
    struct baton_conn_options o = {
        .timeout_ms = s->cfg.peer_timeout_ms, .key = s->cfg.peer_key, .role = BATON_ROLE_PEER};
    rc = baton_conn_adopt_fd_ex(fd, &o, out); /* adopts fd on every path */
    if (rc == 0 && !(baton_conn_server_hello(*out)->features & BATON_FEATURE_PEER_COPY)) {
        baton_conn_close(*out); /* too old, or holds no peer key: cannot take PEER_WRITE */
        rc = BATON_E_UNSUPPORTED;
    }
    if (rc != 0) {
        backoff_fail(s, idx);
        link_unreserve(s);
        *status = rc;
        return BATON_COPY_HANDSHAKE;
    }
    backoff_clear(s, idx);
    return BATON_COPY_DONE;
}

/* A failure of the link itself (as opposed to a refusal the destination
 * sent back): I/O, deadline, a reply that does not verify or match. */
static int is_link_failure(int rc)
{
    return rc == BATON_E_IO || rc == BATON_E_TIMEOUT || rc == BATON_E_TRUNCATED ||
           rc == BATON_E_AUTH || rc == BATON_E_PROTO;
}

uint32_t server_peer_copy(struct baton_server *s, struct baton_session *sess,
                          const struct baton_peer_dest *dest, const uint8_t *data, uint64_t n,
                          int *status)
{
    struct baton_peer_addr key;
    int idx = allow_index(&s->cfg, dest);
    *status = 0;
    if (idx < 0)
        return BATON_COPY_NOT_ALLOWED; /* refused without dialling */
    memset(&key, 0, sizeof key);
    key.family = dest->family;
    key.port = dest->port;
    memcpy(key.addr, dest->addr, 16);
    for (int attempt = 0; attempt < 2; attempt++) {
        uint32_t li;
        for (li = 0; li < sess->n_links; li++)
            if (memcmp(&sess->links[li].dest, &key, sizeof key) == 0)
                break;
        int cached = li < sess->n_links;
        if (!cached) {
            struct baton_conn *conn = NULL;
            uint32_t outcome;
            if (sess->n_links == sess->links_cap) {
                uint32_t cap = sess->links_cap ? sess->links_cap * 2 : 4;
                struct peer_link *nl = realloc(sess->links, (size_t)cap * sizeof *nl);
                if (!nl) {
                    *status = BATON_E_NOMEM;
                    return BATON_COPY_LIMIT;
                }
                sess->links = nl;
                sess->links_cap = cap;
            }
            outcome = dial(s, idx, &conn, status);
            if (outcome != BATON_COPY_DONE)
                return outcome;
            li = sess->n_links++;
            sess->links[li].dest = key;
            sess->links[li].conn = conn;
        }
        int rc = baton_peer_write(sess->links[li].conn, dest->grant, dest->grant_offset, data, n);
        if (rc == 0) {
            sess->peer_bytes_sent +=
                BATON_FRAME_HEADER_BYTES + BATON_PEER_WRITE_HEADER_BYTES + n + BATON_TAG_BYTES;
            return BATON_COPY_DONE;
        }
        /* the destination closes the link after a refusal; on a failure
         * the link is useless: either way it goes */
        link_close(s, sess, li);
        *status = rc;
        if (cached && rc == BATON_E_IO)
            continue; /* a stale cached link (closed at the other end): once, at once */
        return is_link_failure(rc) ? BATON_COPY_IO : BATON_COPY_REFUSED;
    }
    return BATON_COPY_IO;
}
