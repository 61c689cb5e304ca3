/* Sessions: per-connection working memory and the end-of-session cleanup
 * (server_internal.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "baton/status.h"
#include "core/access.h"
#include "server/server_internal.h"

/* Under AddressSanitizer the scratch arena's mapping is poisoned past the
 * bytes the current graph's plan uses (issue 16, "Overruns visible"): the
 * arena is mmap'ed and grown geometrically, so without this a node writing
 * past its plan's scratch_bytes stays inside the mapping and is reported
 * by nothing. Each reservation unpoisons [0, n) and poisons [n, end); the
 * whole mapping is unpoisoned before munmap (as handles.c does for
 * buffers). Elsewhere both macros do nothing. */
#include "server/asan_poison.h"

/* The arena's live range is its first n bytes (n <= scratch_bytes). */
static void scratch_mark_live(struct baton_session *sess, uint64_t n)
{
    if (!sess->scratch)
        return;
    UNPOISON(sess->scratch, n);
    POISON(sess->scratch + n, sess->scratch_bytes - n);
}

uint64_t server_next_session_id(struct baton_server *s)
{
    pthread_mutex_lock(&s->conn_lock);
    uint64_t id = s->next_session++;
    pthread_mutex_unlock(&s->conn_lock);
    return id;
}

void session_init(struct baton_session *sess, uint64_t id)
{
    memset(sess, 0, sizeof *sess);
    sess->id = id;
    sess->client = SERVER_CLASS_OTHER;
}

uint64_t session_memory_cap(const struct baton_server *s, const struct baton_session *sess)
{
    uint64_t cap = s->cfg.session_memory_bytes;
    if (sess->client >= 0 && (uint32_t)sess->client < s->cfg.n_clients &&
        s->cfg.clients[sess->client].session_memory_bytes != 0 &&
        s->cfg.clients[sess->client].session_memory_bytes < cap)
        cap = s->cfg.clients[sess->client].session_memory_bytes;
    return cap;
}

uint64_t session_flops_cap(const struct baton_server *s, const struct baton_session *sess)
{
    if (sess->client >= 0 && (uint32_t)sess->client < s->cfg.n_clients &&
        s->cfg.clients[sess->client].max_graph_flops != 0)
        return s->cfg.clients[sess->client].max_graph_flops;
    return s->cfg.max_graph_flops;
}

static void scratch_release(struct baton_server *s, struct baton_session *sess)
{
    if (sess->scratch) {
        UNPOISON(sess->scratch, sess->scratch_bytes);
        munmap(sess->scratch, sess->scratch_bytes);
        baton_handles_uncharge(s->handles, sess->scratch_bytes);
    }
    sess->scratch = NULL;
    sess->scratch_bytes = 0;
}

uint64_t session_extra_bytes(const struct baton_session *sess)
{
    return baton_access_add_sat(baton_access_add_sat(sess->scratch_bytes, sess->graph_bytes),
                                atomic_load(&sess->staging_bytes));
}

int session_charge(struct baton_server *s, struct baton_session *sess, uint64_t bytes)
{
    uint64_t held = baton_handles_session_bytes(s->handles, sess->id);
    uint64_t extra = session_extra_bytes(sess);
    uint64_t cap = session_memory_cap(s, sess);
    if (baton_access_quota(held, extra, bytes, cap) != 0)
        return BATON_E_QUOTA;
    return baton_handles_charge(s->handles, bytes);
}

static void graph_release(struct baton_server *s, struct stored_graph *g)
{
    free(g->leaves);
    free(g->nodes);
    free(g->plan);
    baton_handles_uncharge(s->handles, g->charged_bytes);
}

void session_graph_free(struct baton_server *s, struct baton_session *sess, uint32_t i)
{
    sess->graph_bytes -= sess->graphs[i].charged_bytes;
    graph_release(s, &sess->graphs[i]);
    sess->graphs[i] = sess->graphs[--sess->n_graphs];
}

void session_end(struct baton_server *s, struct baton_session *sess)
{
    /* grants first, so no PEER_WRITE finds this session's buffers any more */
    grants_drop_session(s->grants, sess->id);
    server_peer_links_close(s, sess);
    while (sess->n_graphs > 0)
        session_graph_free(s, sess, sess->n_graphs - 1);
    free(sess->graphs);
    free(sess->routes);
    baton_handles_free_session(s->handles, sess->id);
    scratch_release(s, sess);
    free(sess->req);
    free(sess->leaves);
    free(sess->leaf_refs);
    free(sess->leaf_data);
    free(sess->nodes);
    free(sess->plan);
    memset(sess, 0, sizeof *sess);
}

int session_reserve_req(struct baton_session *sess, size_t n)
{
    if (n <= sess->req_cap)
        return 0;
    /* exact size: graphs are bounded by the node/leaf limits (a few MiB) */
    uint8_t *p = realloc(sess->req, n);
    if (!p)
        return BATON_E_NOMEM;
    sess->req = p;
    sess->req_cap = n;
    return 0;
}

/* realloc of count elements of size each; count is bounded by the graph
 * limits, so the product cannot overflow size_t. */
static int grow(void **p, size_t count, size_t size)
{
    void *np = realloc(*p, count * size);
    if (!np)
        return BATON_E_NOMEM;
    *p = np;
    return 0;
}

int session_reserve_graph(struct baton_session *sess, uint32_t n_leaves, uint32_t n_nodes)
{
    if (n_leaves > sess->leaves_cap) {
        if (grow((void **)&sess->leaves, n_leaves, sizeof *sess->leaves) ||
            grow((void **)&sess->leaf_refs, n_leaves, sizeof *sess->leaf_refs) ||
            grow((void **)&sess->leaf_data, n_leaves, sizeof *sess->leaf_data))
            return BATON_E_NOMEM;
        sess->leaves_cap = n_leaves;
    }
    if (n_nodes > sess->nodes_cap) {
        if (grow((void **)&sess->nodes, n_nodes, sizeof *sess->nodes) ||
            grow((void **)&sess->plan, n_nodes, sizeof *sess->plan))
            return BATON_E_NOMEM;
        sess->nodes_cap = n_nodes;
    }
    return 0;
}

/* "N bytes", and " (M.M MiB)" from 1 MiB on, for the log lines below. */
static void fmt_bytes(char *buf, size_t cap, uint64_t n)
{
    if (n < (1u << 20))
        snprintf(buf, cap, "%llu bytes", (unsigned long long)n);
    else
        snprintf(buf, cap, "%llu bytes (%.1f MiB)", (unsigned long long)n, (double)n / 1048576.0);
}

/* session_reserve_scratch; ahead: session_prepare_scratch's (n bytes
 * exactly, refusals not logged). */
static int reserve_scratch(struct baton_server *s, struct baton_session *sess, uint64_t n,
                           int ahead)
{
    char need[48], lim[48], have[48];

    uint64_t cap = s->cfg.max_scratch_bytes;
    if (n <= sess->scratch_bytes) {
        scratch_mark_live(sess, n);
        return 0;
    }
    /* each refusal names its limit on a line of its own, just before the
     * command's error line (a reply carries only the status) */
    fmt_bytes(need, sizeof need, n);
    if (n > cap) {
        fmt_bytes(lim, sizeof lim, cap);
        if (!ahead)
            server_log_limited(s,
                               "session %llu: a graph needs a scratch arena of %s, over the "
                               "scratch limit of %s per session (max_scratch_bytes: 1 GiB, or "
                               "the total memory where less; not a policy key)",
                               (unsigned long long)sess->id, need, lim);
        return BATON_E_LIMIT;
    }
    /* grow geometrically so a session's graphs settle on one arena (whole
     * pages, at least n: core/access.h, proven); ahead of the runs, n
     * exactly: the room left is the graphs' still to be registered */
    uint64_t want = 0;
    if (baton_access_scratch_grow(ahead ? 0 : sess->scratch_bytes, n, cap, &want) != 0)
        return BATON_E_LIMIT;
    /* the arena counts against the session's memory as its buffers, its
     * registered graphs and its staged copies do */
    uint64_t held = baton_access_add_sat(
        baton_access_add_sat(baton_handles_session_bytes(s->handles, sess->id), sess->graph_bytes),
        atomic_load(&sess->staging_bytes));
    uint64_t session_cap = session_memory_cap(s, sess);
    uint64_t fit = 0;
    if (baton_access_scratch_fit(held, n, want, session_cap, &fit) != 0) {
        fmt_bytes(have, sizeof have, held);
        fmt_bytes(lim, sizeof lim, session_cap);
        if (!ahead)
            server_log_limited(s,
                               "session %llu: a graph needs a scratch arena of %s; the session "
                               "holds %s of its memory limit of %s (session_memory_bytes)",
                               (unsigned long long)sess->id, need, have, lim);
        return BATON_E_QUOTA;
    }
    want = fit; /* >= n: grow only up to the session's room */
    scratch_release(s, sess);
    int rc = baton_handles_charge(s->handles, want);
    if (rc != 0) {
        fmt_bytes(lim, sizeof lim, want);
        if (!ahead)
            server_log_limited(s,
                               "session %llu: a graph's scratch arena of %s does not fit the "
                               "memory still free of all sessions (total_memory_bytes)",
                               (unsigned long long)sess->id, lim);
        return rc;
    }
    void *p = mmap(NULL, want, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) {
        baton_handles_uncharge(s->handles, want);
        return BATON_E_NOMEM;
    }
    /* faulted in now, in one call: first touches inside the nodes cost a
     * prefill of the d4096 model about a fifth of its time at 2 threads
     * (bench/RESULTS.md, twenty-third session) */
    baton_handles_prefault(p, want);
    sess->scratch = p;
    sess->scratch_bytes = want;
    sess->scratch_ahead = ahead;
    scratch_mark_live(sess, n);
    return 0;
}

int session_reserve_scratch(struct baton_server *s, struct baton_session *sess, uint64_t n)
{
    int rc = reserve_scratch(s, sess, n, 0);
    if (rc == 0)
        sess->scratch_ahead = 0; /* a run's now */
    return rc;
}

void session_prepare_scratch(struct baton_server *s, struct baton_session *sess, uint64_t n)
{
    /* a run's arena is kept as it is: replacing it could lose it (the
     * old one is released before the new one is charged) or let a yield
     * free what a run had reserved; the next run grows it */
    if (sess->scratch && !sess->scratch_ahead)
        return;
    (void)reserve_scratch(s, sess, n, 1);
}

int session_yield_scratch(struct baton_server *s, struct baton_session *sess)
{
    if (!sess->scratch_ahead || !sess->scratch)
        return 0;
    scratch_release(s, sess);
    sess->scratch_ahead = 0;
    return 1;
}
