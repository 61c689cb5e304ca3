/* The lobby: every listener connection before READY (server_internal.h).
 *
 * Strangers must not be able to lock key holders out (SECURITY.md
 * "Connections before authentication"). A connection that has not proven a
 * key costs the server one table entry (under 1 KiB) and a descriptor,
 * never a thread: the listener thread holds them all in one epoll set,
 * reads their HELLO and AUTH frames without blocking, answers them, and
 * only a connection that reached READY gets a connection thread (and
 * counts against max_connections).
 *
 *   - Each entry has one deadline for the whole handshake
 *     (handshake_timeout from its accept).
 *   - When the table is full (max_unauthenticated entries, fewer if the
 *     descriptor limit is lower), or accept finds no descriptor left, a new
 *     connection evicts the oldest entry of the address that holds the most
 *     entries, the newcomer counted (an address: an IPv4 address, or an
 *     IPv6 /64); when its own address already holds
 *     max_unauthenticated_per_ip entries, it evicts that address's oldest
 *     instead. A flood from a few addresses thus evicts its own connections
 *     first. A flood from more addresses than the table holds evicts the
 *     oldest: an honest handshake (one round trip) is pushed out only when a
 *     table's worth of newer connections arrives within its round trip.
 *     An evicted connection gets one E_LIMIT frame. Choosing the victim
 *     costs one pass over the table (O(entries)).
 *   - Frames are read exactly (never past the current frame), so bytes a
 *     client sends after AUTH stay in the socket for its thread.
 *
 * Entries sit on a list in accept order: its head is the oldest, and,
 * since every entry has the same handshake timeout, the next to expire. */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "auth/auth.h"
#include "baton/status.h"
#include "core/limits.h"
#include "net/net.h"
#include "server/server_internal.h"
#include "wire/wire.h"

#define NIL UINT32_MAX
#define EV_LISTEN 0ull
#define EV_STOP 1ull
#define EV_ENTRY 2ull /* data.u64 = EV_ENTRY + entry index */
#define MAX_EVENTS 64
#define ACCEPTS_PER_WAKE 64 /* then the entries' events get their turn */

enum lobby_state { WANT_HELLO = 0, WANT_AUTH };

struct lobby_entry {
    int fd; /* -1: free */
    uint32_t prev, next; /* accept-order list; free entries chain through next */
    uint64_t deadline_ns;
    uint64_t session;
    uint8_t state;
    uint8_t family, ip[16];
    uint32_t have; /* bytes of the current frame in buf */
    uint8_t buf[SERVER_HELLO_FRAME_BYTES];
    struct server_hs hs; /* WANT_AUTH with a key: secret */
    char peer[SERVER_PEER_NAME_BYTES];
};

struct server_lobby {
    struct baton_server *s;
    struct lobby_entry *e;
    uint32_t cap, n;
    uint32_t head, tail; /* oldest, newest */
    uint32_t free_head;
    int epfd;
    void *counts;    /* eviction_victim's table: 2 x cap slots */
    uint64_t now_ns; /* CLOCK_MONOTONIC of the current wake (the harness's clock in tests) */
};

/* ---- the accept-order list ---- */

static void list_unlink(struct server_lobby *L, uint32_t i)
{
    struct lobby_entry *x = &L->e[i];
    if (x->prev != NIL)
        L->e[x->prev].next = x->next;
    else
        L->head = x->next;
    if (x->next != NIL)
        L->e[x->next].prev = x->prev;
    else
        L->tail = x->prev;
}

static void list_append(struct server_lobby *L, uint32_t i)
{
    L->e[i].prev = L->tail;
    L->e[i].next = NIL;
    if (L->tail != NIL)
        L->e[L->tail].next = i;
    else
        L->head = i;
    L->tail = i;
}

/* ---- sending without blocking ---- */

/* One frame, best effort and without blocking (a fresh connection's send
 * buffer always has room for it). Returns 0 when all of it went out. */
static int send_now(int fd, const void *p, size_t n)
{
    ssize_t w;
    do {
        w = send(fd, p, n, MSG_NOSIGNAL | MSG_DONTWAIT);
    } while (w < 0 && errno == EINTR);
    return w == (ssize_t)n ? 0 : BATON_E_IO;
}

static void send_error(int fd, uint8_t cmd, uint32_t seq, int status)
{
    uint8_t hdr[BATON_FRAME_HEADER_BYTES];
    struct baton_frame_header h = {.cmd = cmd, .seq = seq, .status = (uint16_t)(-status)};
    baton_wire_encode_header(hdr, &h);
    (void)send_now(fd, hdr, sizeof hdr);
}

/* ---- entries ---- */

/* Releases entry i: its handshake secrets wiped, off the list, free. Its
 * descriptor is closed, or went to a connection thread. */
static void entry_release(struct server_lobby *L, uint32_t i)
{
    struct lobby_entry *x = &L->e[i];
    baton_hs_destroy(&x->hs.hs);
    list_unlink(L, i);
    x->fd = -1;
    x->next = L->free_head;
    L->free_head = i;
    L->n--;
}

/* Closes entry i: an error frame first when status != 0 (cmd, seq of the
 * frame it answers; an error log line unless log_error is 0: the caller
 * said why already), the unread bytes dropped so that the close is a FIN
 * and not a reset that could overtake that frame, a connection log line. */
static void entry_close(struct server_lobby *L, uint32_t i, uint8_t cmd, uint32_t seq, int status,
                        int log_error, const char *reason)
{
    struct lobby_entry *x = &L->e[i];
    if (status != 0 && log_error)
        server_log_limited(L->s, "session %llu %s: %s, closing", (unsigned long long)x->session,
                           cmd ? baton_cmd_name(cmd) : "frame", baton_status_name(status));
    if (status != 0) {
        send_error(x->fd, cmd, seq, status);
        uint8_t sink[512];
        for (int k = 0; k < 8 && recv(x->fd, sink, sizeof sink, MSG_DONTWAIT) > 0; k++)
            ;
    }
    epoll_ctl(L->epfd, EPOLL_CTL_DEL, x->fd, NULL);
    close(x->fd);
    server_log_conn(L->s, "session %llu closed (%s, peer %s)", (unsigned long long)x->session,
                    reason, x->peer);
    entry_release(L, i);
}

/* Two entries share an address for the caps when their IPv4 addresses are
 * equal, or their IPv6 addresses share the first 64 bits (one host or
 * site usually holds a whole /64, so a full-address match would give it
 * unlimited addresses). */
static int same_address(const struct lobby_entry *x, uint8_t family, const uint8_t *ip)
{
    return x->family == family && memcmp(x->ip, ip, family == 6 ? 8 : 16) == 0;
}

static uint32_t address_hash(uint8_t family, const uint8_t *ip)
{
    uint32_t h = 2166136261u; /* FNV-1a over family and the compared bytes */
    h = (h ^ family) * 16777619u;
    for (int b = 0; b < (family == 6 ? 8 : 16); b++)
        h = (h ^ ip[b]) * 16777619u;
    return h;
}

/* The entry to evict when the lobby is full and a connection from
 * (family, ip) arrives: the oldest entry of the address that holds the
 * most, counting the newcomer with its address; among addresses that tie,
 * the one with the oldest entry. Two passes over the list with a transient
 * count table of 2 x cap slots (linear probing): O(entries). */
static uint32_t eviction_victim(struct server_lobby *L, uint8_t family, const uint8_t *ip)
{
    struct slot {
        uint32_t first; /* an entry of the address (NIL: empty slot) */
        uint32_t count;
    } *t = L->counts;
    const uint32_t size = 2 * L->cap;
    uint32_t best = 0;
    for (uint32_t k = 0; k < size; k++)
        t[k].first = NIL;
    for (uint32_t i = L->head; i != NIL; i = L->e[i].next) {
        const struct lobby_entry *x = &L->e[i];
        uint32_t k = address_hash(x->family, x->ip) % size;
        while (t[k].first != NIL && !same_address(&L->e[t[k].first], x->family, x->ip))
            k = (k + 1) % size;
        if (t[k].first == NIL) {
            t[k].first = i;
            t[k].count = 0;
        }
        t[k].count++;
    }
    /* the newcomer counts for its address (it would hold one more) */
    uint32_t k = address_hash(family, ip) % size;
    while (t[k].first != NIL && !same_address(&L->e[t[k].first], family, ip))
        k = (k + 1) % size;
    if (t[k].first != NIL)
        t[k].count++;
    for (k = 0; k < size; k++)
        if (t[k].first != NIL && t[k].count > best)
            best = t[k].count;
    /* the oldest entry whose address holds best */
    for (uint32_t i = L->head; i != NIL; i = L->e[i].next) {
        const struct lobby_entry *x = &L->e[i];
        k = address_hash(x->family, x->ip) % size;
        while (!same_address(&L->e[t[k].first], x->family, x->ip))
            k = (k + 1) % size;
        if (t[k].count == best)
            return i;
    }
    return L->head; /* not reached: the list is not empty */
}

/* Makes room for a connection from (family, ip): evicts that address's
 * oldest entry when it holds the per-address cap; else, when the lobby is
 * full (or force: no descriptor is left), the entry eviction_victim names.
 * Returns 0 when nothing had to go or one entry went, -1 when the lobby
 * is empty. */
static int make_room(struct server_lobby *L, uint8_t family, const uint8_t *ip, int force)
{
    const struct baton_server_config *cfg = &L->s->cfg;
    uint32_t same = 0, oldest_same = NIL;
    if (family != 0 && cfg->max_unauthenticated_per_ip < L->cap) {
        for (uint32_t i = L->head; i != NIL; i = L->e[i].next) {
            if (same_address(&L->e[i], family, ip)) {
                if (oldest_same == NIL)
                    oldest_same = i;
                same++;
            }
        }
    }
    if (same >= cfg->max_unauthenticated_per_ip) {
        server_log_limited(L->s, "evicted %s: unauthenticated connection limit for its address "
                                 "reached", L->e[oldest_same].peer);
        entry_close(L, oldest_same, 0, 0, BATON_E_LIMIT, 0,
                    "evicted: unauthenticated connection limit for its address");
    } else if (L->n >= L->cap || force) {
        if (L->head == NIL)
            return -1;
        uint32_t victim = eviction_victim(L, family, ip);
        server_log_limited(L->s, "evicted %s: %s", L->e[victim].peer,
                           force ? "no descriptor left for a new connection"
                                 : "unauthenticated connection limit reached");
        entry_close(L, victim, 0, 0, BATON_E_LIMIT, 0, "evicted: unauthenticated connection limit");
    }
    return 0;
}

/* Adds connection fd from (family, ip) to the lobby, making room first;
 * its deadline counts from L->now_ns. */
static void entry_open(struct server_lobby *L, int fd, uint8_t family, const uint8_t *ip)
{
    struct baton_server *s = L->s;
    make_room(L, family, ip, 0);
    uint32_t i = L->free_head;
    struct lobby_entry *x = &L->e[i];
    struct epoll_event ev = {.events = EPOLLIN | EPOLLRDHUP, .data.u64 = EV_ENTRY + i};
    if (epoll_ctl(L->epfd, EPOLL_CTL_ADD, fd, &ev) != 0) {
        server_log_limited(s, "lobby: epoll_ctl failed: %s", strerror(errno));
        close(fd);
        return;
    }
    const uint64_t timeout_ns = (uint64_t)s->cfg.handshake_timeout_ms * 1000000u;
    L->free_head = x->next;
    L->n++;
    memset(x, 0, sizeof *x);
    x->fd = fd;
    x->family = family;
    memcpy(x->ip, ip, sizeof x->ip);
    x->state = WANT_HELLO;
    x->deadline_ns = L->now_ns > UINT64_MAX - timeout_ns ? UINT64_MAX : L->now_ns + timeout_ns;
    x->session = server_next_session_id(s);
    baton_net_peer_string(fd, x->peer, sizeof x->peer);
    list_append(L, i);
    server_log_conn(s, "connection from %s: session %llu", x->peer,
                    (unsigned long long)x->session);
}

/* Starts entry i's connection thread, READY with *ready, after sending
 * reply (the last handshake frame; NULL: built by finish_auth). Caller
 * holds conn_lock and has checked that a slot is free. */
static void hand_off_locked(struct server_lobby *L, uint32_t i, const uint8_t *reply,
                            size_t reply_len, struct server_ready *ready)
{
    struct lobby_entry *x = &L->e[i];
    int fd = x->fd;
    ready->session = x->session;
    if (send_now(fd, reply, reply_len) != 0) {
        server_ready_wipe(ready);
        entry_close(L, i, 0, 0, 0, 1, "send failed");
        return;
    }
    epoll_ctl(L->epfd, EPOLL_CTL_DEL, fd, NULL);
    int rc = server_start_ready_locked(L->s, fd, x->peer, x->family, x->ip, ready);
    if (rc != 0) {
        /* not E_LIMIT (checked by the caller): the descriptor is closed */
        server_log_limited(L->s, "session %llu from %s: cannot start its thread: %s",
                           (unsigned long long)x->session, x->peer, baton_status_name(rc));
        server_log_conn(L->s, "session %llu closed (no thread, peer %s)",
                        (unsigned long long)x->session, x->peer);
    }
    entry_release(L, i);
}

/* Refuses entry i for want of a connection slot (its handshake was fine). */
static void refuse_no_slot(struct server_lobby *L, uint32_t i, uint8_t cmd, uint32_t seq,
                           int client)
{
    if (client >= 0)
        server_log_limited(L->s, "refused %s: connection limit of key %s reached", L->e[i].peer,
                           L->s->cfg.clients[client].name);
    else
        server_log_limited(L->s, "refused %s: connection limit reached", L->e[i].peer);
    entry_close(L, i, cmd, seq, BATON_E_LIMIT, 0, "connection limit");
}

/* The HELLO frame of entry i is complete in buf. */
static void finish_hello(struct server_lobby *L, uint32_t i, const struct baton_frame_header *h)
{
    struct baton_server *s = L->s;
    struct lobby_entry *x = &L->e[i];
    uint8_t rep[SERVER_HELLO_FRAME_BYTES];
    int rc = server_hs_hello(s, x->buf, &x->hs, rep);
    if (rc != 0) {
        entry_close(L, i, h->cmd, h->seq, rc, 1, "handshake refused");
        return;
    }
    if (x->hs.need_auth) {
        if (send_now(x->fd, rep, sizeof rep) != 0) {
            entry_close(L, i, 0, 0, 0, 1, "send failed");
            return;
        }
        x->state = WANT_AUTH;
        x->have = 0;
        return;
    }
    /* no key configured: READY after HELLO */
    struct server_ready ready = {
        .role = x->hs.role, .version = x->hs.version, .client = SERVER_CLASS_OTHER};
    pthread_mutex_lock(&s->conn_lock);
    server_reap_locked(s);
    if (!server_has_room_locked(s, SERVER_CLASS_OTHER))
        refuse_no_slot(L, i, h->cmd, h->seq, SERVER_CLASS_OTHER);
    else
        hand_off_locked(L, i, rep, sizeof rep, &ready);
    pthread_mutex_unlock(&s->conn_lock);
}

/* The AUTH frame of entry i is complete in buf. */
static void finish_auth(struct server_lobby *L, uint32_t i, const struct baton_frame_header *h)
{
    struct baton_server *s = L->s;
    struct lobby_entry *x = &L->e[i];
    uint8_t rep[SERVER_AUTH_FRAME_BYTES];
    struct baton_frame_header rh = {.cmd = h->cmd, .seq = h->seq, .len = BATON_PROOF_BYTES};
    struct server_ready ready;
    memset(&ready, 0, sizeof ready);
    /* the proof first: which key it proves decides the class whose
     * connection cap applies */
    int rc = server_hs_auth(s, &x->hs, x->buf + BATON_FRAME_HEADER_BYTES,
                            rep + BATON_FRAME_HEADER_BYTES, &ready);
    if (rc != 0) {
        server_log_auth_outcome(s, x->session, x->peer, x->hs.role, 0, SERVER_CLASS_OTHER);
        entry_close(L, i, h->cmd, h->seq, BATON_E_AUTH, 1, "authentication failed");
        return;
    }
    pthread_mutex_lock(&s->conn_lock);
    server_reap_locked(s);
    if (!server_has_room_locked(s, ready.client)) {
        /* no proof goes out: the client learns E_LIMIT, nothing else */
        int client = ready.client;
        server_ready_wipe(&ready);
        sodium_memzero(rep, sizeof rep);
        refuse_no_slot(L, i, h->cmd, h->seq, client);
        pthread_mutex_unlock(&s->conn_lock);
        return;
    }
    server_log_auth_outcome(s, x->session, x->peer, x->hs.role, 1, ready.client);
    baton_wire_encode_header(rep, &rh);
    hand_off_locked(L, i, rep, sizeof rep, &ready);
    pthread_mutex_unlock(&s->conn_lock);
    sodium_memzero(rep, sizeof rep);
}

/* Reads what entry i has, without blocking and never past its current
 * frame; acts on a complete frame. */
static void entry_readable(struct server_lobby *L, uint32_t i)
{
    struct baton_server *s = L->s;
    struct lobby_entry *x = &L->e[i];
    const uint32_t payload = x->state == WANT_HELLO ? BATON_HELLO_BYTES : BATON_PROOF_BYTES;
    struct baton_frame_header h;
    for (;;) {
        uint32_t want = x->have < BATON_FRAME_HEADER_BYTES
                            ? BATON_FRAME_HEADER_BYTES - x->have
                            : BATON_FRAME_HEADER_BYTES + payload - x->have;
        ssize_t r = recv(x->fd, x->buf + x->have, want, MSG_DONTWAIT);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            return;
        if (r <= 0) {
            /* after HELLO's reply asked for AUTH, a close is most often a
             * client without this server's key giving up (it says so on
             * its side); any client that sends HELLO and leaves looks the
             * same here */
            entry_close(L, i, 0, 0, 0, 1,
                        x->state == WANT_AUTH && x->have == 0
                            ? "closed by peer before AUTH; a client without the key does this"
                            : "closed by peer");
            return;
        }
        x->have += (uint32_t)r;
        if (x->have < BATON_FRAME_HEADER_BYTES)
            continue;
        size_t pos = 0;
        int rc = baton_wire_decode_header(x->buf, BATON_FRAME_HEADER_BYTES, &pos,
                                          s->cfg.max_message_bytes, &h);
        if (rc == 0 && h.status != 0)
            rc = BATON_E_INVAL; /* requests carry status 0 */
        if (rc != 0) {
            uint8_t cmd;
            uint32_t seq;
            server_header_echo(x->buf, rc, &cmd, &seq);
            entry_close(L, i, cmd, seq, rc, 1, "framing error");
            return;
        }
        uint8_t want_cmd = x->state == WANT_HELLO ? BATON_CMD_HELLO : BATON_CMD_AUTH;
        if (h.cmd != want_cmd || h.len != payload) {
            /* before READY only HELLO, then AUTH, each of its exact size */
            entry_close(L, i, h.cmd, h.seq, h.cmd != want_cmd ? BATON_E_PROTO : BATON_E_INVAL, 1,
                        "framing error");
            return;
        }
        if (x->have < BATON_FRAME_HEADER_BYTES + payload)
            continue;
        if (x->state == WANT_HELLO)
            finish_hello(L, i, &h);
        else
            finish_auth(L, i, &h);
        return;
    }
}

/* Closes the entries whose handshake deadline has passed (the oldest
 * first); returns the ms until the next deadline, capped at cap_ms. */
static int expire(struct server_lobby *L, int cap_ms)
{
    const uint64_t now = L->now_ns;
    while (L->head != NIL && L->e[L->head].deadline_ns <= now) {
        struct lobby_entry *x = &L->e[L->head];
        /* inside a frame: one E_TIMEOUT frame first */
        entry_close(L, L->head, 0, 0, x->have > 0 ? BATON_E_TIMEOUT : 0, 1,
                    x->state == WANT_HELLO ? "no HELLO in time" : "no AUTH in time");
    }
    if (L->head == NIL)
        return cap_ms;
    uint64_t left_ns = L->e[L->head].deadline_ns - now;
    uint64_t ms = (left_ns + 999999) / 1000000;
    return ms < (uint64_t)cap_ms ? (int)ms : cap_ms;
}

/* Accepts up to ACCEPTS_PER_WAKE connections. Returns BATON_E_IO when
 * the listening socket failed, else 0. */
static int accept_some(struct server_lobby *L)
{
    struct baton_server *s = L->s;
    for (int k = 0; k < ACCEPTS_PER_WAKE; k++) {
        int fd, rc = baton_net_accept(s->listen_fd, &fd);
        if (rc == BATON_E_TIMEOUT)
            return 0; /* nothing more waiting, or the client went away */
        if (rc != 0) {
            int e = errno;
            if (e == EMFILE || e == ENFILE) {
                /* out of descriptors: a lobby entry makes way (strangers
                 * must not be able to lock key holders out by using up the
                 * descriptors), else back off a little rather than spin */
                static const uint8_t none[16];
                if (make_room(L, 0, none, 1) == 0)
                    continue;
            }
            if (e == EMFILE || e == ENFILE || e == ENOBUFS || e == ENOMEM) {
                server_log_limited(s, "accept failed: %s", strerror(e));
                poll(NULL, 0, 100);
                return 0;
            }
            if (e == ECONNABORTED || e == EPERM || e == EPROTO)
                continue;
            server_log_limited(s, "accept failed: %s", strerror(e));
            return 0;
        }
        uint8_t family, ip[16];
        server_peer_ip(fd, &family, ip);
        L->now_ns = baton_net_now_ns();
        entry_open(L, fd, family, ip);
    }
    return 0;
}

static void lobby_free(struct server_lobby *L)
{
    if (L->e) {
        while (L->head != NIL)
            entry_close(L, L->head, 0, 0, 0, 1, "server stopping");
        free(L->e);
    }
    free(L->counts);
    if (L->epfd >= 0)
        close(L->epfd);
}

/* Sets up L for s with the epoll set epfd (adopted: closed by lobby_free
 * even on failure): cap entries, all free. Returns 0 or BATON_E_NOMEM. */
static int lobby_init(struct server_lobby *L, struct baton_server *s, int epfd)
{
    memset(L, 0, sizeof *L);
    L->s = s;
    L->head = L->tail = L->free_head = NIL;
    L->epfd = epfd;
    L->cap = s->lobby_cap ? s->lobby_cap : s->cfg.max_unauthenticated;
    L->e = calloc(L->cap, sizeof *L->e);
    L->counts = calloc(2 * (size_t)L->cap, 2 * sizeof(uint32_t));
    if (!L->e || !L->counts || L->epfd < 0) {
        server_log(s, "lobby: cannot allocate its %u entries or its epoll set", L->cap);
        return BATON_E_NOMEM;
    }
    for (uint32_t i = L->cap; i-- > 0;) {
        L->e[i].fd = -1;
        L->e[i].next = L->free_head;
        L->free_head = i;
    }
    return 0;
}

/* Acts on the entries' events of one epoll_wait (evs[0..n)); reports the
 * stop pipe and the listening socket in *stop and *listen_ready (with
 * BATON_E_IO in *result when the listening socket failed). */
static void handle_events(struct server_lobby *L, const struct epoll_event *evs, int n, int *stop,
                          int *listen_ready, int *result)
{
    for (int k = 0; k < n; k++) {
        uint64_t tag = evs[k].data.u64;
        if (tag == EV_STOP) {
            *stop = 1;
        } else if (tag == EV_LISTEN) {
            if (evs[k].events & (EPOLLERR | EPOLLHUP)) {
                /* the listening socket itself failed: stop rather than spin */
                server_log(L->s, "listening socket failed; stopping");
                *result = BATON_E_IO;
                *stop = 1;
            }
            *listen_ready = 1;
        } else {
            uint32_t i = (uint32_t)(tag - EV_ENTRY);
            /* an entry closed earlier in this batch (evicted) is skipped;
             * its index may even be reused by a later accept, which
             * happens after this loop */
            if (i < L->cap && L->e[i].fd >= 0)
                entry_readable(L, i);
        }
    }
}

int server_lobby_run(struct baton_server *s)
{
    struct server_lobby L;
    struct epoll_event evs[MAX_EVENTS];
    int result = 0;
    int epfd = s->lobby_epfd; /* made by baton_server_listen, before the sandbox */
    s->lobby_epfd = -1;
    if (lobby_init(&L, s, epfd) != 0) {
        lobby_free(&L);
        return BATON_E_NOMEM;
    }
    /* the listening socket does not block (baton_server_listen): accept_some
     * stops at EAGAIN */
    struct epoll_event el = {.events = EPOLLIN, .data.u64 = EV_LISTEN};
    struct epoll_event es = {.events = EPOLLIN, .data.u64 = EV_STOP};
    if (epoll_ctl(L.epfd, EPOLL_CTL_ADD, s->listen_fd, &el) != 0 ||
        epoll_ctl(L.epfd, EPOLL_CTL_ADD, s->stop_pipe[0], &es) != 0) {
        server_log(s, "lobby: cannot watch the listening socket: %s", strerror(errno));
        lobby_free(&L);
        return BATON_E_IO;
    }
    while (!atomic_load(&s->stopping)) {
        /* a second at most, so suppressed-line counts come out on time */
        L.now_ns = baton_net_now_ns();
        int timeout = expire(&L, 1000);
        int n = epoll_wait(L.epfd, evs, MAX_EVENTS, timeout);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            server_log(s, "lobby: epoll_wait failed: %s; stopping", strerror(errno));
            result = BATON_E_IO;
            break;
        }
        server_log_flush(s);
        int stop = 0, listen_ready = 0;
        handle_events(&L, evs, n, &stop, &listen_ready, &result);
        if (stop)
            break;
        if (listen_ready)
            accept_some(&L);
    }
    lobby_free(&L);
    return result;
}

/* ---- the test seam (server_internal.h) ---- */

int server_lobby_create(struct baton_server *s, struct server_lobby **out)
{
    struct server_lobby *L = malloc(sizeof *L);
    *out = NULL;
    if (!L)
        return BATON_E_NOMEM;
    if (lobby_init(L, s, epoll_create1(EPOLL_CLOEXEC)) != 0) {
        lobby_free(L);
        free(L);
        return BATON_E_NOMEM;
    }
    *out = L;
    return 0;
}

void server_lobby_adopt(struct server_lobby *L, int fd, uint8_t family, const uint8_t ip[16],
                        uint64_t now_ns)
{
    L->now_ns = now_ns;
    entry_open(L, fd, family, ip);
}

int server_lobby_step(struct server_lobby *L, uint64_t now_ns)
{
    struct epoll_event evs[MAX_EVENTS];
    int stop = 0, listen_ready = 0, result = 0;
    L->now_ns = now_ns;
    (void)expire(L, 0);
    int n = epoll_wait(L->epfd, evs, MAX_EVENTS, 0);
    if (n < 0)
        return errno == EINTR ? 0 : BATON_E_IO;
    handle_events(L, evs, n, &stop, &listen_ready, &result);
    return n;
}

uint32_t server_lobby_entries(const struct server_lobby *L)
{
    return L->n;
}

void server_lobby_destroy(struct server_lobby *L)
{
    if (!L)
        return;
    lobby_free(L);
    free(L);
}
