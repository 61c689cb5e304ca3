/* The server-wide grant table (server_internal.h; DESIGN.md "Grants";
 * docs/PROTOCOL.md "GRANT_WRITE").
 *
 * A grant is a random 128-bit id (libsodium randombytes_buf) naming bytes
 * [offset, offset + length) of one buffer handle (index and generation) of
 * its owner session. PEER_WRITE finds a grant by id only; ids are compared
 * in constant time (sodium_memcmp), so timing does not tell how much of a
 * guessed id matched. The table also keeps, per owner session, the number
 * of its grants (capped by max_grants_per_session) and the PEER_WRITE bytes
 * that landed in its grants.
 *
 * One mutex guards everything; it is held only for table operations,
 * never across I/O. Sizes: at most max_connections sessions own grants,
 * each at most the per-session cap, so both arrays stay small; they grow
 * by doubling.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include <time.h>

#include "auth/auth.h"
#include "baton/status.h"
#include "core/access.h"
#include "net/net.h"
#include "server/server_internal.h"

struct grant_owner {
    uint64_t session;
    uint32_t n_grants;
    uint64_t bytes_received;
};

struct grant_table {
    pthread_mutex_t lock;
    pthread_cond_t changed; /* any fence state changed (CLOCK_MONOTONIC waits) */
    uint32_t per_session; /* max_grants_per_session */
    struct grant *v;
    uint32_t n, cap;
    struct grant_owner *owners;
    uint32_t n_owners, owners_cap;
};

int grants_create(uint32_t per_session, struct grant_table **out)
{
    struct grant_table *g;
    if (baton_auth_init() != 0) /* libsodium: randombytes_buf, sodium_memcmp */
        return BATON_E_IO;
    g = calloc(1, sizeof *g);
    if (!g)
        return BATON_E_NOMEM;
    pthread_condattr_t ca;
    if (pthread_condattr_init(&ca) != 0) {
        free(g);
        return BATON_E_NOMEM;
    }
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    if (pthread_cond_init(&g->changed, &ca) != 0) {
        pthread_condattr_destroy(&ca);
        free(g);
        return BATON_E_NOMEM;
    }
    pthread_condattr_destroy(&ca);
    if (pthread_mutex_init(&g->lock, NULL) != 0) {
        pthread_cond_destroy(&g->changed);
        free(g);
        return BATON_E_NOMEM;
    }
    g->per_session = per_session;
    *out = g;
    return 0;
}

void grants_destroy(struct grant_table *g)
{
    if (!g)
        return;
    sodium_memzero(g->v, (size_t)g->cap * sizeof *g->v);
    free(g->v);
    free(g->owners);
    pthread_cond_destroy(&g->changed);
    pthread_mutex_destroy(&g->lock);
    free(g);
}

/* Caller holds the lock. The owner record of session, or NULL. */
static struct grant_owner *owner_find(struct grant_table *g, uint64_t session)
{
    for (uint32_t i = 0; i < g->n_owners; i++)
        if (g->owners[i].session == session)
            return &g->owners[i];
    return NULL;
}

/* Caller holds the lock. Doubles an array of *cap elements of size bytes
 * (at least 8 elements). Returns 0 or BATON_E_NOMEM. */
static int grow(void **p, uint32_t *cap, size_t size)
{
    uint32_t want = *cap ? *cap * 2 : 8;
    if (want < *cap)
        return BATON_E_NOMEM;
    void *np = realloc(*p, (size_t)want * size);
    if (!np)
        return BATON_E_NOMEM;
    *p = np;
    *cap = want;
    return 0;
}

/* Caller holds the lock. Removes entry i (order is not kept). */
static void remove_at(struct grant_table *g, uint32_t i)
{
    struct grant_owner *o = owner_find(g, g->v[i].owner);
    if (o && o->n_grants > 0)
        o->n_grants--;
    g->v[i] = g->v[--g->n];
    sodium_memzero(&g->v[g->n], sizeof g->v[g->n]);
}

/* Caller holds the lock. Index of the grant with this id, or -1. */
static int64_t find_id(const struct grant_table *g, const uint8_t id[BATON_GRANT_ID_BYTES])
{
    int64_t hit = -1;
    /* every entry is compared, so the time does not depend on where (or
     * whether) the id is */
    for (uint32_t i = 0; i < g->n; i++)
        if (sodium_memcmp(g->v[i].id, id, BATON_GRANT_ID_BYTES) == 0)
            hit = i;
    return hit;
}

int grants_add(struct grant_table *g, uint64_t session, uint64_t handle, uint64_t offset,
               uint64_t length, uint8_t id[BATON_GRANT_ID_BYTES])
{
    struct grant_owner *o;
    struct grant *e;
    int rc = 0;
    pthread_mutex_lock(&g->lock);
    /* one byte, one grant: overlapping grants would let a write through
     * one change the bytes a run fenced on the other reads */
    for (uint32_t i = 0; i < g->n; i++) {
        const struct grant *x = &g->v[i];
        if (x->owner == session && x->handle == handle &&
            baton_access_overlap(offset, length, x->offset, x->length)) {
            rc = BATON_E_INVAL;
            goto out;
        }
    }
    o = owner_find(g, session);
    if ((o ? o->n_grants : 0) >= g->per_session) {
        rc = BATON_E_LIMIT;
        goto out;
    }
    if (!o) {
        if (g->n_owners == g->owners_cap &&
            grow((void **)&g->owners, &g->owners_cap, sizeof *g->owners) != 0) {
            rc = BATON_E_NOMEM;
            goto out;
        }
        o = &g->owners[g->n_owners++];
        memset(o, 0, sizeof *o);
        o->session = session;
    }
    if (g->n == g->cap && grow((void **)&g->v, &g->cap, sizeof *g->v) != 0) {
        rc = BATON_E_NOMEM;
        goto out;
    }
    e = &g->v[g->n];
    /* never the all-zero id (the decoders reject it), never a duplicate */
    do {
        randombytes_buf(e->id, BATON_GRANT_ID_BYTES);
    } while (sodium_is_zero(e->id, BATON_GRANT_ID_BYTES) || find_id(g, e->id) >= 0);
    e->owner = session;
    e->handle = handle;
    e->offset = offset;
    e->length = length;
    e->last_seq = e->landed_seq = e->failed_seq = 0;
    e->writing = e->readers = 0;
    memcpy(id, e->id, BATON_GRANT_ID_BYTES);
    g->n++;
    o->n_grants++;
out:
    pthread_mutex_unlock(&g->lock);
    return rc;
}

int grants_revoke(struct grant_table *g, uint64_t session, const uint8_t id[BATON_GRANT_ID_BYTES])
{
    int rc = BATON_E_NOT_FOUND;
    pthread_mutex_lock(&g->lock);
    int64_t i = find_id(g, id);
    /* another session's grant is "not found" too: ids are not shared */
    if (i >= 0 && g->v[i].owner == session) {
        remove_at(g, (uint32_t)i);
        pthread_cond_broadcast(&g->changed);
        rc = 0;
    }
    pthread_mutex_unlock(&g->lock);
    return rc;
}

int grants_find(struct grant_table *g, const uint8_t id[BATON_GRANT_ID_BYTES], struct grant *out)
{
    int rc = BATON_E_NOT_FOUND;
    pthread_mutex_lock(&g->lock);
    int64_t i = find_id(g, id);
    if (i >= 0) {
        *out = g->v[i];
        rc = 0;
    }
    pthread_mutex_unlock(&g->lock);
    return rc;
}

void grants_drop_handle(struct grant_table *g, uint64_t session, uint64_t handle)
{
    pthread_mutex_lock(&g->lock);
    for (uint32_t i = 0; i < g->n;) {
        if (g->v[i].owner == session && g->v[i].handle == handle)
            remove_at(g, i);
        else
            i++;
    }
    pthread_cond_broadcast(&g->changed);
    pthread_mutex_unlock(&g->lock);
}

void grants_drop_session(struct grant_table *g, uint64_t session)
{
    pthread_mutex_lock(&g->lock);
    for (uint32_t i = 0; i < g->n;) {
        if (g->v[i].owner == session)
            remove_at(g, i);
        else
            i++;
    }
    for (uint32_t i = 0; i < g->n_owners; i++) {
        if (g->owners[i].session == session) {
            g->owners[i] = g->owners[--g->n_owners];
            break;
        }
    }
    pthread_cond_broadcast(&g->changed);
    pthread_mutex_unlock(&g->lock);
}

void grants_add_received(struct grant_table *g, uint64_t session, uint64_t bytes)
{
    pthread_mutex_lock(&g->lock);
    struct grant_owner *o = owner_find(g, session);
    if (o)
        o->bytes_received += bytes;
    pthread_mutex_unlock(&g->lock);
}

void grants_session_info(struct grant_table *g, uint64_t session, uint64_t *bytes_received,
                         uint32_t *n_grants)
{
    pthread_mutex_lock(&g->lock);
    struct grant_owner *o = owner_find(g, session);
    if (bytes_received)
        *bytes_received = o ? o->bytes_received : 0;
    if (n_grants)
        *n_grants = o ? o->n_grants : 0;
    pthread_mutex_unlock(&g->lock);
}

/* ---- fences (docs/PROTOCOL.md "Asynchronous hand-off") ----
 * Entries move when others are removed, so every step below looks its
 * grant up again by id, under the lock, after each wait. */

/* Caller holds the lock. Waits on `changed` until deadline_ns
 * (CLOCK_MONOTONIC). Returns 0, or BATON_E_TIMEOUT once the deadline has
 * passed. */
static int wait_changed(struct grant_table *g, uint64_t deadline_ns)
{
    if (baton_net_now_ns() >= deadline_ns)
        return BATON_E_TIMEOUT;
    struct timespec ts = {.tv_sec = (time_t)(deadline_ns / 1000000000u),
                          .tv_nsec = (long)(deadline_ns % 1000000000u)};
    pthread_cond_timedwait(&g->changed, &g->lock, &ts);
    return 0;
}

int grants_write_begin(struct grant_table *g, const uint8_t id[BATON_GRANT_ID_BYTES],
                       uint64_t seq, uint64_t deadline_ns, struct grant *out)
{
    int rc;
    pthread_mutex_lock(&g->lock);
    for (;;) {
        int64_t i = find_id(g, id);
        if (i < 0) {
            rc = BATON_E_NOT_FOUND;
            break;
        }
        struct grant *e = &g->v[i];
        if (seq <= e->last_seq || e->writing) {
            rc = BATON_E_FENCE; /* not newer than what the grant has seen */
            break;
        }
        if (e->readers == 0) {
            e->writing = 1;
            e->last_seq = seq;
            e->landed_seq = 0; /* the old bytes are going */
            *out = *e;
            rc = 0;
            break;
        }
        if (wait_changed(g, deadline_ns) != 0) {
            rc = BATON_E_TIMEOUT; /* a run kept reading the grant */
            break;
        }
    }
    pthread_mutex_unlock(&g->lock);
    return rc;
}

int grants_write_land(struct grant_table *g, const uint8_t id[BATON_GRANT_ID_BYTES], uint64_t seq,
                      uint8_t *dst, const uint8_t *src, size_t n)
{
    int rc = BATON_E_NOT_FOUND;
    pthread_mutex_lock(&g->lock);
    int64_t i = find_id(g, id);
    if (i >= 0 && g->v[i].writing && g->v[i].last_seq == seq) {
        memcpy(dst, src, n); /* under the lock: a revoke or seal waits for it */
        rc = 0;
    } else if (i >= 0) {
        rc = BATON_E_FENCE; /* voided by the owner (grants_seal) */
    }
    pthread_mutex_unlock(&g->lock);
    return rc;
}

void grants_write_end(struct grant_table *g, const uint8_t id[BATON_GRANT_ID_BYTES], uint64_t seq,
                      int landed)
{
    pthread_mutex_lock(&g->lock);
    int64_t i = find_id(g, id);
    if (i >= 0 && g->v[i].writing && g->v[i].last_seq == seq) {
        g->v[i].writing = 0;
        if (landed)
            g->v[i].landed_seq = seq;
        else
            g->v[i].failed_seq = seq;
    }
    pthread_cond_broadcast(&g->changed);
    pthread_mutex_unlock(&g->lock);
}

int grants_cancel(struct grant_table *g, const uint8_t id[BATON_GRANT_ID_BYTES], uint64_t seq)
{
    int rc = 0;
    pthread_mutex_lock(&g->lock);
    int64_t i = find_id(g, id);
    if (i < 0) {
        rc = BATON_E_NOT_FOUND;
    } else if (seq <= g->v[i].last_seq || g->v[i].writing) {
        rc = BATON_E_FENCE;
    } else {
        g->v[i].last_seq = seq;
        g->v[i].failed_seq = seq;
        pthread_cond_broadcast(&g->changed);
    }
    pthread_mutex_unlock(&g->lock);
    return rc;
}

int grants_seal(struct grant_table *g, uint64_t session, const uint8_t id[BATON_GRANT_ID_BYTES],
                uint64_t seq)
{
    int rc = 0;
    pthread_mutex_lock(&g->lock);
    int64_t i = find_id(g, id);
    if (i < 0 || g->v[i].owner != session) {
        rc = BATON_E_NOT_FOUND; /* another session's grant is not found either */
    } else if (seq <= g->v[i].last_seq) {
        rc = BATON_E_FENCE;
    } else {
        /* a write in progress lands nothing more: grants_write_land checks
         * last_seq under this lock */
        g->v[i].writing = 0;
        g->v[i].landed_seq = 0; /* the owner may change the bytes now: no fence passes */
        g->v[i].last_seq = seq;
        g->v[i].failed_seq = seq;
        pthread_cond_broadcast(&g->changed);
    }
    pthread_mutex_unlock(&g->lock);
    return rc;
}

/* How often a fence wait asks whether its run is still wanted. */
#define FENCE_CHECK_NS (100u * 1000000u)

int grants_fence_wait(struct grant_table *g, uint64_t session,
                      const uint8_t (*ids)[BATON_GRANT_ID_BYTES], const uint64_t *seqs,
                      uint32_t n, uint64_t deadline_ns, int (*abandoned)(void *), void *arg,
                      uint32_t *failed)
{
    int rc;
    pthread_mutex_lock(&g->lock);
    for (;;) {
        uint32_t ready = 0, i;
        rc = 0;
        for (i = 0; i < n && rc == 0; i++) {
            int64_t k = find_id(g, ids[i]);
            if (k < 0 || g->v[k].owner != session) {
                rc = BATON_E_NOT_FOUND; /* another session's grant is not found either */
                break;
            }
            const struct grant *e = &g->v[k];
            if (!e->writing && e->landed_seq == seqs[i])
                ready++;
            /* writes only move forward: once a newer one began, or this
             * one ended without landing (failed, cancelled), it never lands */
            else if (e->last_seq > seqs[i] || (e->last_seq == seqs[i] && !e->writing)) {
                rc = BATON_E_FENCE;
                break; /* i names this fence */
            }
        }
        if (rc != 0) {
            *failed = i;
            break;
        }
        if (ready == n) {
            /* all at once, under the lock: no fence is held while another
             * is waited for */
            for (i = 0; i < n; i++)
                g->v[find_id(g, ids[i])].readers++;
            break;
        }
        uint64_t now = baton_net_now_ns();
        if (now >= deadline_ns) {
            for (i = 0; i < n; i++) {
                int64_t k = find_id(g, ids[i]);
                if (k < 0 || g->v[k].writing || g->v[k].landed_seq != seqs[i])
                    break;
            }
            *failed = i < n ? i : 0;
            rc = BATON_E_TIMEOUT;
            break;
        }
        (void)wait_changed(g, deadline_ns - now > FENCE_CHECK_NS ? now + FENCE_CHECK_NS
                                                                 : deadline_ns);
        /* a run whose client went away (or a server stopping) waits no
         * longer: asked without the table lock */
        if (abandoned) {
            pthread_mutex_unlock(&g->lock);
            int gone = abandoned(arg);
            pthread_mutex_lock(&g->lock);
            if (gone) {
                *failed = 0;
                rc = BATON_E_IO;
                break;
            }
        }
    }
    pthread_mutex_unlock(&g->lock);
    return rc;
}

void grants_fence_release(struct grant_table *g, const uint8_t id[BATON_GRANT_ID_BYTES])
{
    pthread_mutex_lock(&g->lock);
    int64_t i = find_id(g, id);
    if (i >= 0 && g->v[i].readers > 0)
        g->v[i].readers--;
    pthread_cond_broadcast(&g->changed);
    pthread_mutex_unlock(&g->lock);
}
