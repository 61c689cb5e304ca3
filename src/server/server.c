/* Server lifecycle: configuration, listener, connection threads, drain,
 * logging (server.h). */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <netinet/in.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include "auth/auth.h"
#include "baton/status.h"
#include "core/limits.h"
#include "net/net.h"
#include "server/log.h"
#include "server/server_internal.h"
#include "wire/wire.h"

#define LOG_WINDOW_NS 1000000000ull
/* lingering close of a connection the server ends (net/transport.h) */
#define CONN_LINGER_MS 250
#define CONN_LINGER_MAX_BYTES (1u << 20)

void baton_server_config_default(struct baton_server_config *cfg)
{
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    uint64_t ram = (pages > 0 && page > 0) ? (uint64_t)pages * (uint64_t)page : (1ull << 30);
    memset(cfg, 0, sizeof *cfg);
    cfg->n_threads = 1;
    cfg->max_message_bytes = 1ull << 30;
    cfg->max_graph_nodes = BATON_DEFAULT_MAX_GRAPH_NODES;
    cfg->total_memory_bytes = ram / 4 * 3;
    cfg->max_connections = 64;
    cfg->frame_timeout_ms = 10000;
    cfg->send_timeout_ms = 10000;
    cfg->quiet = 0;
    cfg->max_scratch_bytes = BATON_SCRATCH_LIMIT_BYTES;
    cfg->idle_timeout_ms = 300000;
    cfg->max_unauthenticated = 1024;
    cfg->max_unauthenticated_per_ip = 1024;
    cfg->handshake_timeout_ms = 5000;
    cfg->session_memory_bytes = cfg->total_memory_bytes; /* 0 also means "the total" */
    cfg->max_graph_flops = BATON_DEFAULT_MAX_GRAPH_FLOPS;
    cfg->max_graphs_per_session = 32;
    cfg->fence_timeout_ms = 20000;
    cfg->compute_slice_ms = 10;
    cfg->max_grants_per_session = 64;
    cfg->max_peer_links = 16;
    cfg->max_peer_links_per_session = 4;
    cfg->peer_timeout_ms = 5000;
    cfg->peer_backoff_max_ms = 60000;
    cfg->peer_queue_depth = 4;
    cfg->log_rate = 20;
}

/* ---- logging (server/log.h: text, journal or JSON lines) ---- */

void server_log(struct baton_server *s, const char *fmt, ...)
{
    va_list ap;
    if (s->cfg.quiet)
        return;
    va_start(ap, fmt);
    baton_vlog(BATON_LOG_ERR, "server", NULL, 0, fmt, ap);
    va_end(ap);
}

static void log_suppressed(uint64_t n, const char *kind)
{
    struct baton_log_field f = {"suppressed", NULL, (long long)n};
    baton_log(BATON_LOG_WARNING, "log", &f, 1, "(%llu %slog lines suppressed)",
              (unsigned long long)n, kind);
}

/* Starts l's next window at now (under log_lock); returns the count the
 * window that ended dropped. */
static uint64_t log_window_reset(struct log_limiter *l, uint64_t now)
{
    uint64_t dropped = l->suppressed;
    l->suppressed = 0;
    l->window_start_ns = now;
    l->in_window = 0;
    return dropped;
}

/* Counts one line against l; returns whether it may be printed and sets
 * *suppressed to the count dropped in the window that just ended. */
static int log_admit(struct baton_server *s, struct log_limiter *l, uint64_t *suppressed)
{
    uint64_t now = baton_net_now_ns();
    int allow;
    *suppressed = 0;
    pthread_mutex_lock(&s->log_lock);
    if (now - l->window_start_ns >= LOG_WINDOW_NS)
        *suppressed = log_window_reset(l, now);
    allow = l->in_window < s->cfg.log_rate;
    if (allow)
        l->in_window++;
    else
        l->suppressed++;
    pthread_mutex_unlock(&s->log_lock);
    return allow;
}

/* One rate-limited line against l; kind names the lines in the summary
 * ("error ", "connection ", "authentication "). */
static void vlog_limited(struct baton_server *s, struct log_limiter *l, const char *kind,
                         int level, const char *fmt, va_list ap)
{
    uint64_t suppressed;
    char json_kind[32];
    if (s->cfg.quiet)
        return;
    int allow = log_admit(s, l, &suppressed);
    if (suppressed)
        log_suppressed(suppressed, kind);
    if (allow) {
        /* "connection " -> "connection" */
        snprintf(json_kind, sizeof json_kind, "%.*s", (int)strcspn(kind, " "), kind);
        baton_vlog(level, json_kind, NULL, 0, fmt, ap);
    }
}

void server_log_limited(struct baton_server *s, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vlog_limited(s, &s->log_errors, "error ", BATON_LOG_WARNING, fmt, ap);
    va_end(ap);
}

void server_log_conn(struct baton_server *s, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vlog_limited(s, &s->log_connections, "connection ", BATON_LOG_INFO, fmt, ap);
    va_end(ap);
}

void server_log_auth(struct baton_server *s, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vlog_limited(s, &s->log_auth, "authentication ", BATON_LOG_NOTICE, fmt, ap);
    va_end(ap);
}

/* The summary of l's window if it is over and dropped lines. */
static void log_flush_one(struct baton_server *s, struct log_limiter *l, const char *kind)
{
    uint64_t now = baton_net_now_ns(), suppressed = 0;
    pthread_mutex_lock(&s->log_lock);
    if (l->suppressed && now - l->window_start_ns >= LOG_WINDOW_NS)
        suppressed = log_window_reset(l, now);
    pthread_mutex_unlock(&s->log_lock);
    if (suppressed)
        log_suppressed(suppressed, kind);
}

void server_log_flush(struct baton_server *s)
{
    if (s->cfg.quiet)
        return;
    log_flush_one(s, &s->log_errors, "error ");
    log_flush_one(s, &s->log_connections, "connection ");
    log_flush_one(s, &s->log_auth, "authentication ");
}

/* ---- create / destroy ---- */

int baton_server_create(const struct baton_server_config *cfg, struct baton_server **out)
{
    struct baton_server *s = calloc(1, sizeof *s);
    int rc = BATON_E_NOMEM;
    if (!s)
        return BATON_E_NOMEM;
    s->cfg = *cfg;
    s->listen_fd = -1;
    s->lobby_epfd = -1;
    s->stop_pipe[0] = s->stop_pipe[1] = -1;
    s->next_session = 1;
    if (s->cfg.max_message_bytes == 0 || s->cfg.max_message_bytes > BATON_MAX_MESSAGE_BYTES ||
        s->cfg.max_graph_nodes == 0 || s->cfg.max_graph_nodes > BATON_MAX_GRAPH_NODES ||
        s->cfg.max_connections == 0 || s->cfg.n_threads == 0 ||
        s->cfg.n_threads > BATON_POOL_MAX_THREADS || s->cfg.frame_timeout_ms <= 0 ||
        s->cfg.send_timeout_ms <= 0 || s->cfg.handshake_timeout_ms <= 0 ||
        s->cfg.idle_timeout_ms < 0 || s->cfg.max_unauthenticated == 0 ||
        s->cfg.max_unauthenticated_per_ip == 0 || s->cfg.max_graph_flops == 0 ||
        s->cfg.n_peers > BATON_SERVER_MAX_PEERS || s->cfg.peer_timeout_ms <= 0 ||
        s->cfg.peer_backoff_max_ms <= 0 || s->cfg.fence_timeout_ms <= 0 ||
        s->cfg.peer_queue_depth == 0 || s->cfg.peer_queue_depth > 64 ||
        s->cfg.compute_slice_ms <= 0) {
        free(s);
        return BATON_E_INVAL;
    }
    /* authentication: any key turns it on; encryption needs a key */
    if (s->cfg.n_clients > BATON_SERVER_MAX_CLIENTS) {
        free(s);
        return BATON_E_INVAL;
    }
    uint64_t n_slots = s->cfg.max_connections;
    for (uint32_t i = 0; i < s->cfg.n_clients; i++) {
        if (!s->cfg.clients[i].key || s->cfg.clients[i].max_connections == 0) {
            free(s);
            return BATON_E_INVAL;
        }
        n_slots += s->cfg.clients[i].max_connections;
    }
    s->auth_required =
        s->cfg.client_key != NULL || s->cfg.peer_key != NULL || s->cfg.n_clients > 0;
    if (s->cfg.encrypt && !s->auth_required) {
        free(s);
        return BATON_E_INVAL;
    }
    if (s->auth_required && baton_auth_init() != 0) {
        free(s);
        return BATON_E_IO;
    }
    if (s->cfg.max_scratch_bytes > s->cfg.total_memory_bytes)
        s->cfg.max_scratch_bytes = s->cfg.total_memory_bytes;
    if (s->cfg.session_memory_bytes == 0 || s->cfg.session_memory_bytes > s->cfg.total_memory_bytes)
        s->cfg.session_memory_bytes = s->cfg.total_memory_bytes;
    pthread_mutex_init(&s->device.mu, NULL);
    pthread_cond_init(&s->device.cv, NULL);
    pthread_mutex_init(&s->conn_lock, NULL);
    pthread_mutex_init(&s->log_lock, NULL);
    pthread_mutex_init(&s->peer_lock, NULL);
    pthread_cond_init(&s->conn_done, NULL);
    s->n_slots = (uint32_t)n_slots; /* max_connections + each client's own */
    s->slots = calloc(s->n_slots, sizeof *s->slots);
    if (!s->slots)
        goto fail;
    if (pipe2(s->stop_pipe, O_CLOEXEC | O_NONBLOCK) != 0) {
        rc = BATON_E_IO;
        goto fail;
    }
    rc = baton_handles_create(s->cfg.total_memory_bytes, &s->handles);
    if (rc == 0)
        rc = baton_pool_create(s->cfg.n_threads, &s->pool);
    if (rc == 0)
        rc = grants_create(s->cfg.max_grants_per_session, &s->grants);
    if (rc != 0)
        goto fail;
    *out = s;
    return 0;
fail:
    baton_server_destroy(s);
    return rc;
}

/* Joins finished connection threads. Caller holds conn_lock. */
void server_reap_locked(struct baton_server *s)
{
    for (uint32_t i = 0; i < s->n_slots; i++) {
        if (s->slots[i].state == SLOT_DONE) {
            pthread_join(s->slots[i].thread, NULL);
            s->slots[i].state = SLOT_FREE;
        }
    }
}

/* Asks every connection to end at its next frame boundary and waits until
 * all have (each is bounded by its frame and send deadlines). */
static void drain(struct baton_server *s)
{
    baton_server_stop(s);
    pthread_mutex_lock(&s->conn_lock);
    while (s->n_active > 0)
        pthread_cond_wait(&s->conn_done, &s->conn_lock);
    server_reap_locked(s);
    pthread_mutex_unlock(&s->conn_lock);
}

void baton_server_destroy(struct baton_server *s)
{
    if (!s)
        return;
    if (s->slots && s->stop_pipe[1] >= 0)
        drain(s);
    if (s->listen_fd >= 0)
        close(s->listen_fd);
    if (s->lobby_epfd >= 0)
        close(s->lobby_epfd);
    if (s->stop_pipe[0] >= 0)
        close(s->stop_pipe[0]);
    if (s->stop_pipe[1] >= 0)
        close(s->stop_pipe[1]);
    baton_pool_destroy(s->pool);
    baton_handles_destroy(s->handles);
    grants_destroy(s->grants);
    free(s->slots);
    pthread_cond_destroy(&s->conn_done);
    pthread_mutex_destroy(&s->peer_lock);
    pthread_mutex_destroy(&s->log_lock);
    pthread_mutex_destroy(&s->conn_lock);
    pthread_cond_destroy(&s->device.cv);
    pthread_mutex_destroy(&s->device.mu);
    free(s);
}

void baton_server_stop(struct baton_server *s)
{
    int saved = errno; /* async-signal-safe: only a flag and write(2) */
    atomic_store(&s->stopping, 1);
    ssize_t w = write(s->stop_pipe[1], "s", 1);
    (void)w; /* EAGAIN: the pipe already holds a byte, which is all we need */
    errno = saved;
}

/* ---- the compute device, in turns ---- */

void server_device_acquire(struct baton_server *s, int client, uint64_t *turn_start)
{
    struct device_turns *d = &s->device;
    pthread_mutex_lock(&d->mu);
    if (!d->busy && !d->head) {
        d->busy = 1;
        d->holder = client;
    } else {
        struct device_waiter w = {.next = NULL, .client = client, .granted = 0};
        if (d->tail)
            d->tail->next = &w;
        else
            d->head = &w;
        d->tail = &w;
        atomic_fetch_add(&d->waiting, 1);
        while (!w.granted)
            pthread_cond_wait(&d->cv, &d->mu);
        atomic_fetch_sub(&d->waiting, 1);
    }
    pthread_mutex_unlock(&d->mu);
    *turn_start = baton_net_now_ns();
}

void server_device_release(struct baton_server *s)
{
    struct device_turns *d = &s->device;
    pthread_mutex_lock(&d->mu);
    /* the first waiter of another class than the holder's, else the first */
    struct device_waiter **pick = &d->head, *prev = NULL, *pick_prev = NULL;
    for (struct device_waiter **w = &d->head; *w; prev = *w, w = &(*w)->next) {
        if ((*w)->client != d->holder) {
            pick = w;
            pick_prev = prev;
            break;
        }
    }
    struct device_waiter *next = *pick;
    if (next) {
        *pick = next->next;
        if (d->tail == next)
            d->tail = pick_prev;
        next->granted = 1;
        d->holder = next->client;
        pthread_cond_broadcast(&d->cv);
    } else {
        d->busy = 0;
    }
    pthread_mutex_unlock(&d->mu);
}

void server_device_between(struct baton_server *s, int client, uint64_t *turn_start)
{
    struct device_turns *d = &s->device;
    if (atomic_load(&d->waiting) == 0 ||
        baton_net_now_ns() - *turn_start < (uint64_t)s->cfg.compute_slice_ms * 1000000u)
        return;
    atomic_fetch_add(&d->handovers, 1);
    server_device_release(s);
    server_device_acquire(s, client, turn_start);
}

/* ---- connections ---- */

static void *conn_main(void *arg)
{
    struct conn_slot *slot = arg;
    struct baton_server *s = slot->server;
    server_serve_connection(s, slot->transport, slot->peer, slot);
    /* a connection the server ends (a fatal error) may still hold unread
     * request bytes: linger so the client reads the error frame, not a
     * reset (a client that closed first is at EOF already) */
    baton_transport_socket_linger(slot->transport, baton_net_deadline_ms(CONN_LINGER_MS),
                                  CONN_LINGER_MAX_BYTES);
    baton_transport_close(slot->transport);
    slot->transport = NULL;
    pthread_mutex_lock(&s->conn_lock);
    slot->state = SLOT_DONE;
    s->n_active--;
    pthread_cond_broadcast(&s->conn_done);
    pthread_mutex_unlock(&s->conn_lock);
    return NULL;
}

/* The client address of fd for the per-IP cap: family 4 or 6 (an
 * IPv4-mapped IPv6 address counts as IPv4), 0 when it has none (AF_UNIX). */
void server_peer_ip(int fd, uint8_t *family, uint8_t ip[16])
{
    struct sockaddr_storage ss;
    socklen_t sl = sizeof ss;
    *family = 0;
    memset(ip, 0, 16);
    if (getpeername(fd, (struct sockaddr *)&ss, &sl) != 0)
        return;
    if (ss.ss_family == AF_INET) {
        *family = 4;
        memcpy(ip, &((struct sockaddr_in *)&ss)->sin_addr, 4);
    } else if (ss.ss_family == AF_INET6) {
        const struct in6_addr *a = &((struct sockaddr_in6 *)&ss)->sin6_addr;
        if (IN6_IS_ADDR_V4MAPPED(a)) {
            *family = 4;
            memcpy(ip, a->s6_addr + 12, 4);
        } else {
            *family = 6;
            memcpy(ip, a->s6_addr, 16);
        }
    }
}

/* Checks the caps for a new connection from (family, ip) and picks a free
 * slot. Caller holds conn_lock. Returns the slot, or NULL with *why set. */
static struct conn_slot *admit_locked(struct baton_server *s, uint8_t family, const uint8_t *ip,
                                      const char **why)
{
    struct conn_slot *free_slot = NULL;
    uint32_t unauth = 0, unauth_ip = 0;
    for (uint32_t i = 0; i < s->n_slots; i++) {
        struct conn_slot *sl = &s->slots[i];
        if (sl->state == SLOT_FREE) {
            if (!free_slot)
                free_slot = sl;
            continue;
        }
        if (sl->state != SLOT_RUNNING || sl->authenticated)
            continue;
        unauth++;
        if (family != 0 && sl->ip_family == family && memcmp(sl->ip, ip, 16) == 0)
            unauth_ip++;
    }
    if (!free_slot) {
        *why = "connection limit";
        return NULL;
    }
    if (unauth >= s->cfg.max_unauthenticated) {
        *why = "unauthenticated connection limit";
        return NULL;
    }
    if (family != 0 && unauth_ip >= s->cfg.max_unauthenticated_per_ip) {
        *why = "unauthenticated connection limit for its address";
        return NULL;
    }
    return free_slot;
}

/* baton_server_serve_fd (the in-stream handshake of the dispatcher); *why
 * (may be NULL) names the cap that refused the connection. */
static int serve_fd_ex(struct baton_server *s, int fd, const char **why)
{
    struct conn_slot *slot = NULL;
    const char *reason = "server stopping";
    uint8_t family, ip[16];
    int rc;
    server_peer_ip(fd, &family, ip);
    pthread_mutex_lock(&s->conn_lock);
    if (atomic_load(&s->stopping)) {
        rc = BATON_E_IO;
        goto fail;
    }
    server_reap_locked(s);
    slot = admit_locked(s, family, ip, &reason);
    if (!slot) {
        rc = BATON_E_LIMIT;
        goto fail;
    }
    baton_net_set_nodelay(fd);
    baton_net_peer_string(fd, slot->peer, sizeof slot->peer);
    slot->authenticated = 0;
    slot->client = SERVER_CLASS_OTHER;
    slot->ip_family = family;
    memcpy(slot->ip, ip, sizeof slot->ip);
    rc = baton_transport_socket(fd, s->stop_pipe[0], &slot->transport);
    fd = -1; /* adopted, even on failure */
    if (rc != 0)
        goto fail;
    slot->server = s;
    slot->state = SLOT_RUNNING;
    s->n_active++;
    if (pthread_create(&slot->thread, NULL, conn_main, slot) != 0) {
        s->n_active--;
        slot->state = SLOT_FREE;
        baton_transport_close(slot->transport);
        slot->transport = NULL;
        rc = BATON_E_NOMEM;
        goto fail;
    }
    pthread_mutex_unlock(&s->conn_lock);
    return 0;
fail:
    pthread_mutex_unlock(&s->conn_lock);
    if (fd >= 0)
        close(fd);
    if (why)
        *why = reason;
    return rc;
}

int server_has_room_locked(struct baton_server *s, int client)
{
    uint32_t cap = client >= 0 && (uint32_t)client < s->cfg.n_clients
                       ? s->cfg.clients[client].max_connections
                       : s->cfg.max_connections;
    uint32_t in_class = 0, free_slots = 0;
    for (uint32_t i = 0; i < s->n_slots; i++) {
        if (s->slots[i].state == SLOT_FREE)
            free_slots++;
        else if (s->slots[i].client == client)
            in_class++;
    }
    return in_class < cap && free_slots > 0;
}

int server_start_ready_locked(struct baton_server *s, int fd, const char *peer, uint8_t family,
                              const uint8_t *ip, struct server_ready *ready)
{
    struct conn_slot *slot = NULL;
    if (!server_has_room_locked(s, ready->client))
        return BATON_E_LIMIT;
    for (uint32_t i = 0; i < s->n_slots && !slot; i++)
        if (s->slots[i].state == SLOT_FREE)
            slot = &s->slots[i];
    snprintf(slot->peer, sizeof slot->peer, "%s", peer);
    slot->client = ready->client;
    slot->authenticated = 1;
    slot->ip_family = family;
    memcpy(slot->ip, ip, sizeof slot->ip);
    int rc = baton_transport_socket(fd, s->stop_pipe[0], &slot->transport);
    if (rc != 0) { /* fd closed by it */
        server_ready_wipe(ready);
        return rc;
    }
    slot->server = s;
    slot->ready = *ready;
    slot->has_ready = 1;
    server_ready_wipe(ready);
    slot->state = SLOT_RUNNING;
    s->n_active++;
    if (pthread_create(&slot->thread, NULL, conn_main, slot) != 0) {
        s->n_active--;
        slot->state = SLOT_FREE;
        server_ready_wipe(&slot->ready);
        slot->has_ready = 0;
        baton_transport_close(slot->transport);
        slot->transport = NULL;
        return BATON_E_NOMEM;
    }
    return 0;
}

int baton_server_serve_fd(struct baton_server *s, int fd)
{
    return serve_fd_ex(s, fd, NULL);
}

void server_conn_authenticated(struct baton_server *s, struct conn_slot *slot)
{
    if (!slot)
        return;
    pthread_mutex_lock(&s->conn_lock);
    slot->authenticated = 1;
    pthread_mutex_unlock(&s->conn_lock);
}

int baton_server_serve_transport(struct baton_server *s, struct baton_transport *t,
                                 const char *peer)
{
    int rc = server_serve_connection(s, t, peer, NULL);
    baton_transport_close(t);
    return rc;
}

uint32_t baton_server_active_connections(struct baton_server *s)
{
    pthread_mutex_lock(&s->conn_lock);
    uint32_t n = s->n_active;
    pthread_mutex_unlock(&s->conn_lock);
    return n;
}

/* ---- listener ---- */

/* Descriptors the server needs besides the lobby: each connection thread's
 * socket and its session's peer links, the listener, the stop pipe, the
 * epoll set, log and policy files, and some headroom. */
static uint64_t fixed_descriptors(const struct baton_server *s)
{
    return (uint64_t)s->n_slots + s->cfg.max_peer_links + 64;
}

/* Raises the soft RLIMIT_NOFILE towards the hard limit so that the lobby's
 * max_unauthenticated entries fit beside everything else; when even the
 * hard limit is too low, the lobby holds fewer entries (and says so). */
static void fit_descriptor_limit(struct baton_server *s)
{
    struct rlimit rl;
    uint64_t want = fixed_descriptors(s) + s->cfg.max_unauthenticated;
    s->lobby_cap = s->cfg.max_unauthenticated;
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0)
        return;
    if (rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur < want) {
        struct rlimit up = rl;
        up.rlim_cur = (rl.rlim_max == RLIM_INFINITY || rl.rlim_max >= want) ? want : rl.rlim_max;
        if (setrlimit(RLIMIT_NOFILE, &up) == 0)
            rl = up;
    }
    if (rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur < want) {
        uint64_t fixed = fixed_descriptors(s);
        uint64_t room = rl.rlim_cur > fixed + 8 ? rl.rlim_cur - fixed : 8;
        s->lobby_cap = (uint32_t)room;
        server_log(s, "the descriptor limit (%llu) leaves room for %u unauthenticated "
                      "connections, not max_unauthenticated = %u%s; when descriptors run out, "
                      "a new connection evicts one of them",
                   (unsigned long long)rl.rlim_cur, s->lobby_cap, s->cfg.max_unauthenticated,
                   rl.rlim_cur < fixed ? " (max_connections and max_peer_links do not fit "
                                         "either)"
                                       : "");
    }
}

int baton_server_listen(struct baton_server *s, const char *host, uint16_t port,
                        uint16_t *bound_port)
{
    if (s->listen_fd >= 0)
        return BATON_E_INVAL;
    /* Without authentication anyone who reaches the port could use the
     * server's memory: elsewhere than loopback only with a key, or when the
     * operator said so explicitly (batond --insecure-no-auth). */
    if (!s->auth_required && !s->cfg.insecure_no_auth && !baton_net_host_is_loopback(host))
        return BATON_E_AUTH;
    fit_descriptor_limit(s);
    /* the lobby's epoll set is made here, before the sandbox goes on, so
     * the allow-list needs only epoll_ctl and epoll_wait */
    s->lobby_epfd = epoll_create1(EPOLL_CLOEXEC);
    if (s->lobby_epfd < 0)
        return BATON_E_IO;
    /* a deep backlog: a burst of connections is accepted at once instead
     * of waiting in SYN retries; the lobby accepts without blocking */
    int rc = baton_net_listen(host, port, 1024, &s->listen_fd, bound_port);
    int fl = rc == 0 ? fcntl(s->listen_fd, F_GETFL) : -1;
    if (rc == 0 && (fl < 0 || fcntl(s->listen_fd, F_SETFL, fl | O_NONBLOCK) != 0)) {
        close(s->listen_fd);
        s->listen_fd = -1;
        rc = BATON_E_IO;
    }
    return rc;
}

int baton_server_run(struct baton_server *s)
{
    if (s->listen_fd < 0)
        return BATON_E_INVAL;
    int result = server_lobby_run(s);
    /* stop accepting, let in-flight requests finish, close connections */
    close(s->listen_fd);
    s->listen_fd = -1;
    drain(s);
    server_log_flush(s);
    return result;
}
