/* Outbound peer links and the transfer of COPY_TENSOR_TO
 * (server_internal.h; DESIGN.md "Peers"; docs/PROTOCOL.md "Direct path").
 *
 * A link is an initiator connection of libbaton (src/client) opened with
 * the peer role and the peer key, so it goes through the same HELLO + AUTH
 * handshake and carries the same frame tags as a coordinator's connection.
 * Links belong to the session that asked for them, keyed by destination
 * (address, port), and are closed when that session ends; so a link, its
 * descriptor, its sender thread and its queue live exactly as long as their
 * session. Each link has one sender thread: COPY_TENSOR_TO queues a job
 * (a write with its sequence number, or a cancellation) and either returns
 * at once (asynchronous: the data copied to a staging buffer first) or
 * waits for the job's outcome; the sender runs the jobs in order under the
 * peer deadlines, so the session's connection thread goes on serving while
 * a copy is on its way. A small copy on an idle, connected link skips the
 * sender: the connection thread sends it itself (and, when asynchronous,
 * does not wait for its reply, which is read before the link's next copy):
 * on a decode step each thread wake costs tens of microseconds between the
 * vCPUs of a VM, more than the send.
 *
 * Only destinations on the allow-list (cfg.peers, exact binary address and
 * port, resolved at start) are dialled, by binary address: no name
 * resolution happens after start. The backoff table has one entry per
 * allow-list entry (so it is server-wide, keyed by address:port, and
 * bounded); only connect and handshake failures enter it.
 */
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "auth/auth.h"
#include "baton/client.h"
#include "baton/status.h"
#include "net/net.h"
#include "server/server_internal.h"

/* One job of a link's sender: a write (data, n) or a cancellation. */
enum { JOB_WRITE = 0, JOB_CANCEL };

struct peer_job {
    int kind;
    uint8_t grant[BATON_GRANT_ID_BYTES];
    uint64_t offset, seq;
    const uint8_t *data; /* JOB_WRITE: the staging copy (async) or the caller's pinned range */
    uint64_t n;
    uint8_t *staging;    /* owned by the job (async writes), charged to the session */
    uint32_t cancel;     /* JOB_CANCEL: the positive status that caused it */
    int sync;            /* the connection thread waits for `done` */
    int done;
    uint32_t outcome;
    int status;
};

#define LINK_QUEUE_MAX 64u
#define INLINE_MAX_BYTES (64u * 1024u) /* copies this small go at once, from the caller */
#define BACKOFF_FIRST_MS 1000u /* peer_queue_depth is capped by the policy below this */

struct peer_link {
    struct baton_server *s;
    struct baton_session *sess; /* its counters; the session outlives the link */
    struct baton_peer_addr dest;
    int allow_idx;
    pthread_mutex_t mu;
    pthread_cond_t cv; /* queue not empty / not full, job done, stop */
    struct peer_job *queue[LINK_QUEUE_MAX];
    uint32_t head, count;
    int stop;
    int exited;              /* the sender returned (idle without a connection): join it */
    int inline_busy;         /* the connection thread is making a copy itself (it owns conn) */
    int thread_failed;       /* exited is set but no thread was started: nothing to join */
    int connected;           /* conn != NULL (read by the connection thread) */
    struct baton_conn *conn; /* the sender thread's alone once it runs */
    pthread_t thread;
};

void server_yield_to_sender(struct baton_session *sess)
{
    if (!sess->sender_queued)
        return;
    sess->sender_queued = 0;
    sched_yield();
}

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

/* A link of a session of class client (SERVER_CLASS_OTHER or a named
 * client, whose links together have a cap of their own). */
static int link_reserve(struct baton_server *s, int client)
{
    int rc = 0;
    const int named = client >= 0 && (uint32_t)client < s->cfg.n_clients;
    pthread_mutex_lock(&s->peer_lock);
    if (s->n_links >= s->cfg.max_peer_links ||
        (named && s->client_links[client] >= s->cfg.clients[client].max_peer_links)) {
        rc = BATON_E_LIMIT;
    } else {
        s->n_links++;
        if (named)
            s->client_links[client]++;
    }
    pthread_mutex_unlock(&s->peer_lock);
    return rc;
}

static void link_unreserve(struct baton_server *s, int client)
{
    pthread_mutex_lock(&s->peer_lock);
    if (s->n_links > 0)
        s->n_links--;
    if (client >= 0 && (uint32_t)client < s->cfg.n_clients && s->client_links[client] > 0)
        s->client_links[client]--;
    pthread_mutex_unlock(&s->peer_lock);
}

/* Opens a link to allow-list entry idx: connect, HELLO + AUTH with the peer
 * key in the peer role, each under peer_timeout_ms; the destination must
 * advertise PEER_COPY. Returns BATON_COPY_DONE with *out, or the outcome
 * and *status. */
static uint32_t dial(struct baton_server *s, int client, int idx, struct baton_conn **out,
                     int *status)
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
    if (link_reserve(s, client) != 0) {
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
    if (s->peer_connect)
        rc = s->peer_connect(s->peer_connect_ctx, a, s->cfg.peer_timeout_ms, &fd);
    else
        rc = baton_net_connect_addr((const struct sockaddr *)&ss, sl, s->cfg.peer_timeout_ms,
                                    &fd);
    if (rc != 0) {
        backoff_fail(s, idx);
        link_unreserve(s, client);
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
        link_unreserve(s, client);
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

static void link_disconnect(struct peer_link *l)
{
    baton_conn_close(l->conn);
    l->conn = NULL;
    link_unreserve(l->s, l->sess->client); /* dial reserved it */
    pthread_mutex_lock(&l->mu);
    l->connected = 0;
    pthread_mutex_unlock(&l->mu);
}

/* The reply of a write sent without waiting (an asynchronous copy made by
 * the connection thread): counted, and a refusal or failure closes the
 * link. */
static void account_reply(struct peer_link *l, int rc)
{
    if (rc == 0) {
        atomic_fetch_add(&l->sess->copies_done, 1);
        return;
    }
    atomic_fetch_add(&l->sess->copies_not_done, 1);
    server_log_limited(l->s, "session %llu COPY_TENSOR_TO (asynchronous): not done (%s: %s)",
                       (unsigned long long)l->sess->id,
                       server_copy_outcome_name(is_link_failure(rc) ? BATON_COPY_IO
                                                                    : BATON_COPY_REFUSED),
                       baton_status_name(rc));
    link_disconnect(l);
}

/* Reads the replies of unacknowledged writes: those that have arrived
 * (wait 0), or all of them (wait 1, within the link's deadline). */
static void link_reap(struct peer_link *l, int wait)
{
    while (l->conn && baton_conn_outstanding(l->conn) > 0) {
        struct pollfd p = {baton_conn_fd(l->conn), POLLIN, 0};
        if (!wait && poll(&p, 1, 0) != 1)
            return;
        account_reply(l, baton_conn_read_reply(l->conn));
    }
}

/* Whether the link's connection was closed at the other end: with no reply
 * outstanding, anything readable (EOF, or bytes nobody asked for) means the
 * destination is done with it (its idle timeout, a restart on the way).
 * Sending on it would still succeed locally, and the write would be lost. */
static int link_closed_by_peer(const struct peer_link *l)
{
    struct pollfd p = {baton_conn_fd(l->conn), POLLIN, 0};

    return baton_conn_outstanding(l->conn) == 0 && poll(&p, 1, 0) == 1;
}

/* Runs one job on the sender thread: dial when there is no connection,
 * send, and on a stale cached connection (closed at the other end) retry
 * once, at once, on a fresh one. Sets job->outcome and job->status. */
static void run_job(struct peer_link *l, struct peer_job *job)
{
    struct baton_server *s = l->s;
    job->status = 0;
    link_reap(l, 1); /* earlier writes' replies are theirs, not this job's */
    for (int attempt = 0; attempt < 2; attempt++) {
        int cached = l->conn != NULL;
        int rc;
        if (!cached) {
            struct baton_conn *conn = NULL;
            uint32_t outcome = dial(s, l->sess->client, l->allow_idx, &conn, &job->status);
            if (outcome != BATON_COPY_DONE) {
                job->outcome = outcome;
                return;
            }
            l->conn = conn;
            pthread_mutex_lock(&l->mu);
            l->connected = 1;
            pthread_mutex_unlock(&l->mu);
        }
        if (job->kind == JOB_WRITE)
            rc = baton_peer_write(l->conn, job->grant, job->offset, job->seq, job->data, job->n);
        else
            rc = baton_peer_fence(l->conn, job->grant, job->seq, job->cancel);
        if (rc == 0) {
            if (job->kind == JOB_WRITE)
                atomic_fetch_add(&l->sess->peer_bytes_sent,
                                 BATON_FRAME_HEADER_BYTES + BATON_PEER_WRITE_HEADER_BYTES +
                                     job->n + BATON_TAG_BYTES);
            job->outcome = BATON_COPY_DONE;
            job->status = 0;
            return;
        }
        /* the destination closes the link after a refused PEER_WRITE; on
         * a failure the link is useless: either way it goes. (A refused
         * PEER_FENCE leaves the link open, but it goes too: simpler.) */
        link_disconnect(l);
        job->status = rc;
        if (cached && rc == BATON_E_IO)
            continue;
        job->outcome = is_link_failure(rc) ? BATON_COPY_IO : BATON_COPY_REFUSED;
        return;
    }
    job->outcome = BATON_COPY_IO;
}

static void job_free(struct peer_link *l, struct peer_job *job)
{
    if (job->staging) {
        free(job->staging);
        atomic_fetch_sub(&l->sess->staging_bytes, job->n);
        baton_handles_uncharge(l->s->handles, job->n);
    }
    free(job);
}

/* The sender: one per link, jobs in the order they were queued. */
static void *sender_main(void *arg)
{
    struct peer_link *l = arg;
    pthread_mutex_lock(&l->mu);
    for (;;) {
        /* idle: it waits while the link is connected (a copy made at once
         * by the connection thread may have closed it: then it goes) */
        while (!l->stop && (l->inline_busy || (l->count == 0 && l->connected)))
            pthread_cond_wait(&l->cv, &l->mu);
        if (l->count == 0 && !l->stop) {
            l->exited = 1;
            break;
        }
        if (l->count == 0)
            break; /* stopping, nothing left */
        struct peer_job *job = l->queue[l->head];
        int dropping = l->stop;
        pthread_mutex_unlock(&l->mu);
        if (dropping) {
            job->outcome = BATON_COPY_IO; /* the session is ending: not sent */
            job->status = BATON_E_IO;
        } else {
            run_job(l, job);
        }
        if (!job->sync) {
            if (job->outcome == BATON_COPY_DONE && job->kind == JOB_WRITE) {
                atomic_fetch_add(&l->sess->copies_done, 1);
            } else if (job->kind == JOB_WRITE) {
                atomic_fetch_add(&l->sess->copies_not_done, 1);
                if (!dropping)
                    server_log_limited(l->s,
                                       "session %llu COPY_TENSOR_TO (asynchronous, seq %llu): "
                                       "not done (%s%s%s)",
                                       (unsigned long long)l->sess->id,
                                       (unsigned long long)job->seq,
                                       server_copy_outcome_name(job->outcome),
                                       job->status ? ": " : "",
                                       job->status ? baton_status_name(job->status) : "");
            }
        }
        pthread_mutex_lock(&l->mu);
        l->head = (l->head + 1) % LINK_QUEUE_MAX;
        l->count--;
        if (job->sync) {
            job->done = 1; /* the waiting connection thread frees it */
        } else {
            pthread_mutex_unlock(&l->mu);
            job_free(l, job);
            pthread_mutex_lock(&l->mu);
        }
        pthread_cond_broadcast(&l->cv);
        /* idle without a connection (its dial or write failed): the thread
         * goes, so a link that failed holds neither a descriptor nor a
         * thread; the next copy starts it again */
        if (l->count == 0 && !l->connected) {
            l->exited = 1;
            break;
        }
    }
    pthread_mutex_unlock(&l->mu);
    if (l->conn)
        link_disconnect(l);
    return NULL;
}

/* Starts (or, after it exited, restarts) the sender of l. Caller holds
 * l->mu. 0 or BATON_E_NOMEM. */
static int sender_start(struct peer_link *l)
{
    if (l->exited) {
        if (!l->thread_failed)
            pthread_join(l->thread, NULL);
        l->exited = 0;
    }
    if (pthread_create(&l->thread, NULL, sender_main, l) != 0) {
        l->exited = 1; /* nothing to join: a later copy tries again */
        l->thread_failed = 1;
        return BATON_E_NOMEM;
    }
    l->thread_failed = 0;
    return 0;
}

static void link_destroy(struct peer_link *l)
{
    pthread_mutex_lock(&l->mu);
    l->stop = 1;
    pthread_cond_broadcast(&l->cv);
    pthread_mutex_unlock(&l->mu);
    if (!l->thread_failed)
        pthread_join(l->thread, NULL);
    pthread_cond_destroy(&l->cv);
    pthread_mutex_destroy(&l->mu);
    free(l);
}

void server_peer_links_close(struct baton_server *s, struct baton_session *sess)
{
    while (sess->n_links > 0)
        link_destroy(sess->links[--sess->n_links]);
    (void)s;
    free(sess->links);
    sess->links = NULL;
    sess->links_cap = 0;
}

/* The link of sess to allow-list entry idx (key: its address), created on
 * first use (its sender starts with its first job; the connection, and its
 * slot of max_peer_links, come with the sender's first dial). NULL with
 * *outcome / *status when it cannot be: no peer key, no memory. */
static struct peer_link *link_get(struct baton_server *s, struct baton_session *sess, int idx,
                                  const struct baton_peer_addr *key, uint32_t *outcome,
                                  int *status)
{
    for (uint32_t i = 0; i < sess->n_links; i++)
        if (memcmp(&sess->links[i]->dest, key, sizeof *key) == 0)
            return sess->links[i];
    *outcome = BATON_COPY_LIMIT;
    if (!s->cfg.peer_key) {
        *status = BATON_E_AUTH; /* no key to prove: this server cannot dial peers */
        return NULL;
    }
    if (sess->n_links >= s->cfg.max_peer_links_per_session) {
        /* one session cannot take the server's links from the others */
        *status = BATON_E_LIMIT;
        return NULL;
    }
    if (sess->n_links == sess->links_cap) {
        uint32_t cap = sess->links_cap ? sess->links_cap * 2 : 4;
        struct peer_link **nl = realloc(sess->links, (size_t)cap * sizeof *nl);
        if (!nl) {
            *status = BATON_E_NOMEM;
            return NULL;
        }
        sess->links = nl;
        sess->links_cap = cap;
    }
    struct peer_link *l = calloc(1, sizeof *l);
    if (!l || pthread_mutex_init(&l->mu, NULL) != 0) {
        free(l);
        *status = BATON_E_NOMEM;
        return NULL;
    }
    if (pthread_cond_init(&l->cv, NULL) != 0) {
        pthread_mutex_destroy(&l->mu);
        free(l);
        *status = BATON_E_NOMEM;
        return NULL;
    }
    l->s = s;
    l->sess = sess;
    l->dest = *key;
    l->allow_idx = idx;
    l->exited = 1; /* no sender yet */
    l->thread_failed = 1;
    sess->links[sess->n_links++] = l;
    return l;
}

uint32_t server_peer_copy(struct baton_server *s, struct baton_session *sess,
                          const struct baton_peer_dest *dest, const struct baton_copy_options *opt,
                          uint32_t cancel, const uint8_t *data, uint64_t n, int *status)
{
    struct baton_peer_addr key;
    uint32_t outcome = BATON_COPY_LIMIT;
    int idx = allow_index(&s->cfg, dest);
    *status = 0;
    if (idx < 0)
        return BATON_COPY_NOT_ALLOWED; /* refused without dialling */
    memset(&key, 0, sizeof key);
    key.family = dest->family;
    key.port = dest->port;
    memcpy(key.addr, dest->addr, 16);
    struct peer_link *l = link_get(s, sess, idx, &key, &outcome, status);
    if (!l)
        return outcome;
    /* no connection and in backoff: said now, nothing is queued */
    pthread_mutex_lock(&l->mu);
    int connected = l->connected || l->count > 0;
    pthread_mutex_unlock(&l->mu);
    if (!connected && backoff_active(s, idx))
        return BATON_COPY_BACKOFF;

    struct peer_job *job = calloc(1, sizeof *job);
    if (!job) {
        *status = BATON_E_NOMEM;
        return BATON_COPY_LIMIT;
    }
    job->kind = cancel ? JOB_CANCEL : JOB_WRITE;
    memcpy(job->grant, dest->grant, BATON_GRANT_ID_BYTES);
    job->offset = dest->grant_offset;
    job->seq = opt->seq;
    job->cancel = cancel;
    job->sync = !(opt->flags & BATON_COPY_ASYNC);
    job->n = n;
    job->data = data;
    /* a small write on an idle, connected link is made at once by this
     * thread: no staging, and no wake of the sender on the way out or for
     * the reply (a decode step's hand-off is a few KiB; its round trip
     * costs the source nothing it would otherwise do). A cancellation is
     * always queued: the failed run's reply does not wait for it. */
    if (job->kind == JOB_WRITE && n <= INLINE_MAX_BYTES) {
        int idle;
        pthread_mutex_lock(&l->mu);
        idle = l->count == 0 && l->connected && !l->stop;
        if (idle)
            l->inline_busy = 1; /* the link is this thread's until it is done */
        pthread_mutex_unlock(&l->mu);
        int handled = idle;
        if (idle && !job->sync) {
            /* sent, not waited for: its reply is read with a later copy
             * (or never, if none follows), so no thread wakes for it. A
             * link found closed (the destination's idle timeout) or that
             * fails before a byte went falls through to the sender, which
             * dials a fresh one (as run_job retries a stale link) */
            int rc;
            link_reap(l, 0);
            if (l->conn && link_closed_by_peer(l))
                link_disconnect(l);
            rc = l->conn ? baton_submit_peer_write(l->conn, job->grant, job->offset, job->seq,
                                                   job->data, job->n)
                         : BATON_E_IO;
            if (rc == 0) {
                atomic_fetch_add(&sess->peer_bytes_sent,
                                 BATON_FRAME_HEADER_BYTES + BATON_PEER_WRITE_HEADER_BYTES + n +
                                     BATON_TAG_BYTES);
                job->outcome = BATON_COPY_QUEUED;
            } else {
                /* the destination saw at most part of it (then seq fails
                 * there, and the retry is refused as not newer) */
                if (l->conn)
                    link_disconnect(l);
                handled = 0;
            }
        } else if (idle) {
            run_job(l, job);
        }
        if (idle) {
            pthread_mutex_lock(&l->mu);
            l->inline_busy = 0;
            pthread_cond_broadcast(&l->cv);
            pthread_mutex_unlock(&l->mu);
        }
        if (handled) {
            outcome = job->outcome;
            *status = job->status;
            free(job);
            return outcome;
        }
    }
    if (job->kind == JOB_WRITE) {
        /* asynchronous: the bytes are copied now, in order with this
         * session's commands, so a later GRAPH_RUN may overwrite the
         * source while the sender sends */
        if (!job->sync) {
            if (session_charge(s, sess, n) == 0) {
                job->staging = malloc(n);
                if (!job->staging)
                    baton_handles_uncharge(s->handles, n);
            }
            if (job->staging) {
                memcpy(job->staging, data, n);
                job->data = job->staging;
                atomic_fetch_add(&sess->staging_bytes, n);
            } else {
                job->sync = 1; /* no room to stage: copied synchronously instead */
            }
        }
    }
    pthread_mutex_lock(&l->mu);
    while (l->count >= s->cfg.peer_queue_depth && !l->stop && !l->exited)
        pthread_cond_wait(&l->cv, &l->mu); /* each queued job is bounded by deadlines */
    if (l->exited && sender_start(l) != 0) {
        pthread_mutex_unlock(&l->mu);
        job_free(l, job);
        *status = BATON_E_NOMEM;
        return BATON_COPY_LIMIT;
    }
    l->queue[(l->head + l->count) % LINK_QUEUE_MAX] = job;
    l->count++;
    pthread_cond_broadcast(&l->cv);
    if (!job->sync) {
        pthread_mutex_unlock(&l->mu);
        sess->sender_queued = 1;
        return cancel ? BATON_COPY_CANCELLED : BATON_COPY_QUEUED;
    }
    while (!job->done)
        pthread_cond_wait(&l->cv, &l->mu);
    pthread_mutex_unlock(&l->mu);
    outcome = job->outcome;
    *status = job->status;
    if (job->kind == JOB_CANCEL) {
        outcome = BATON_COPY_CANCELLED;
        *status = BATON_E_FENCE;
    }
    free(job);
    return outcome;
}
