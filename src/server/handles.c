/* Buffer handle table (handles.h). */
#include "server/handles.h"

#include <pthread.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#include "baton/status.h"
#include "core/access.h"
#include "core/limits.h"

/* Under AddressSanitizer a buffer's mapping is poisoned beyond its size
 * (issue 16, "Overruns visible"). A buffer is mmap'ed in whole pages, so
 * without this an access past `size` but inside the last page (a GET or a
 * COPY reading a few bytes too many, a graph writing past its leaf) is
 * reported by nothing; with it ASan reports use-after-poison at the first
 * such byte. The mapping is unpoisoned again before munmap, so a later
 * mapping at the same address (or memory ASan hands out there) does not
 * inherit the poison. ASan's shadow is plain memory it maps at start, so
 * this makes no system call and changes nothing for seccomp (sanitizer
 * builds run batond without it anyway, src/server/sandbox.h). Elsewhere
 * both macros do nothing. */
#include "server/asan_poison.h"

/* Every munmap of a buffer goes through here: see POISON above. */
static void unmap_buffer(uint8_t *mem, uint64_t mapped)
{
    UNPOISON(mem, mapped);
    munmap(mem, mapped);
}

enum slot_state {
    SLOT_EMPTY = 0, /* on the free list */
    SLOT_RESERVED,  /* popped, quota charged, being mapped outside the lock */
    SLOT_LIVE,      /* resolvable by its owner */
    SLOT_DYING,     /* freed (generation bumped), still pinned */
};

struct handle_entry {
    uint8_t *mem;
    uint64_t size;   /* usable bytes, as allocated */
    uint64_t mapped; /* page-rounded bytes, counted in used_bytes */
    uint64_t owner;  /* session id */
    uint32_t generation;
    uint32_t pins;
    uint8_t state;
};

struct baton_handle_table {
    pthread_mutex_t table_lock; /* entries, free list, used_bytes */
    uint64_t total_bytes;
    uint64_t used_bytes;
    uint64_t page;
    uint32_t n_free;
    uint32_t free_idx[BATON_MAX_BUFFERS];
    struct handle_entry e[BATON_MAX_BUFFERS];
};

int baton_handles_create(uint64_t total_bytes, struct baton_handle_table **out)
{
    struct baton_handle_table *t = calloc(1, sizeof *t);
    long pg = sysconf(_SC_PAGESIZE);
    if (!t)
        return BATON_E_NOMEM;
    if (pthread_mutex_init(&t->table_lock, NULL) != 0) {
        free(t);
        return BATON_E_NOMEM;
    }
    t->total_bytes = total_bytes;
    t->page = pg > 0 ? (uint64_t)pg : 4096;
    /* lowest index on top, so index 0 is handed out first */
    t->n_free = BATON_MAX_BUFFERS;
    for (uint32_t i = 0; i < BATON_MAX_BUFFERS; i++) {
        t->free_idx[i] = BATON_MAX_BUFFERS - 1 - i;
        t->e[i].generation = 1;
    }
    *out = t;
    return 0;
}

void baton_handles_destroy(struct baton_handle_table *t)
{
    if (!t)
        return;
    for (uint32_t i = 0; i < BATON_MAX_BUFFERS; i++)
        if (t->e[i].mem)
            unmap_buffer(t->e[i].mem, t->e[i].mapped);
    pthread_mutex_destroy(&t->table_lock);
    free(t);
}

/* Caller holds table_lock. The index comes from the proven split
 * (baton_access_handle: index < BATON_MAX_BUFFERS), the verdict on the
 * entry from baton_access_handle_entry. */
static int lookup(struct baton_handle_table *t, uint64_t session, uint64_t handle,
                  struct handle_entry **out)
{
    uint32_t index = 0, gen = 0;
    int rc = baton_access_handle(handle, BATON_MAX_BUFFERS, &index, &gen);
    if (rc != 0)
        return rc;
    struct handle_entry *e = &t->e[index];
    rc = baton_access_handle_entry(e->state == SLOT_LIVE, e->generation, gen, e->owner, session);
    if (rc != 0)
        return rc;
    *out = e;
    return 0;
}

/* Caller holds table_lock. Turns a live entry into a freed one: the
 * generation moves on at once; an unpinned entry goes back to the free list
 * and its memory is handed to the caller (*mem, *mapped) to unmap after
 * unlocking. */
static void retire(struct baton_handle_table *t, struct handle_entry *e, uint8_t **mem,
                   uint64_t *mapped)
{
    e->generation++;
    if (e->generation == 0)
        e->generation = 1;
    *mem = NULL;
    *mapped = 0;
    if (e->pins > 0) {
        e->state = SLOT_DYING;
        return;
    }
    *mem = e->mem;
    *mapped = e->mapped;
    e->mem = NULL;
    e->size = 0;
    e->mapped = 0;
    e->owner = 0;
    e->state = SLOT_EMPTY;
    t->free_idx[t->n_free++] = (uint32_t)(e - t->e);
}

/* Unmaps outside the lock, then gives the bytes back to the quota (so the
 * quota never counts less than what is mapped). */
static void unmap_and_uncharge(struct baton_handle_table *t, uint8_t *mem, uint64_t mapped)
{
    if (!mem)
        return;
    unmap_buffer(mem, mapped);
    baton_handles_uncharge(t, mapped);
}

/* Caller holds table_lock. Mapped bytes of session's entries (reserved,
 * live, or freed but still pinned). */
static uint64_t session_bytes_locked(const struct baton_handle_table *t, uint64_t session)
{
    uint64_t n = 0;
    for (uint32_t i = 0; i < BATON_MAX_BUFFERS; i++)
        if (t->e[i].state != SLOT_EMPTY && t->e[i].owner == session)
            n = baton_access_add_sat(n, t->e[i].mapped);
    return n;
}

uint64_t baton_handles_session_bytes(struct baton_handle_table *t, uint64_t session)
{
    pthread_mutex_lock(&t->table_lock);
    uint64_t n = session ? session_bytes_locked(t, session) : 0;
    pthread_mutex_unlock(&t->table_lock);
    return n;
}

int baton_handles_alloc(struct baton_handle_table *t, uint64_t session, uint64_t size,
                        uint64_t *handle)
{
    return baton_handles_alloc_capped(t, session, size, UINT64_MAX, 0, handle);
}

/* MADV_POPULATE_WRITE (Linux 5.14, madvise(2)): fault every page of the
 * buffer in, writable and zeroed, now. A buffer is otherwise faulted in on
 * first touch, and the KV cache is first touched one slot at a time by the
 * decode steps themselves: in baton bench of the 86M Q4_0 model
 * (bench/RESULTS.md, fourth round) the ATTENTION ops took 15-25 % less time
 * with the pages populated here. The zeroing is no extra work (the kernel
 * zeroes each page on its first fault either way); the buffer's memory is
 * committed at ALLOC_BUFFER, which its quota already counts. An older
 * kernel answers EINVAL and the pages fault in as before.
 *
 * Only buffers up to BATON_POPULATE_MAX_BYTES. Populating commits the
 * whole buffer, also the part of a KV cache that a short run never reaches
 * (a --ctx 100000 run of the small real model holds its whole 128 MiB cache
 * for 21 positions; llama.cpp clears, and so commits, its cache too), and
 * takes time in proportion: 3.3 s per GiB of memory this VM had never
 * touched, against a client's 30 s deadline; where the quota (3/4 of RAM by
 * default) exceeds free memory it would wake the OOM killer at allocation.
 * Larger buffers fault in on first touch, as before. */
#ifndef MADV_POPULATE_WRITE
#define BATON_MADV_POPULATE_WRITE 23
#else
#define BATON_MADV_POPULATE_WRITE MADV_POPULATE_WRITE
#endif
#define BATON_POPULATE_MAX_BYTES (1ull << 30)

void baton_handles_prefault(void *mem, uint64_t mapped)
{
    if (mapped >= (2u << 20))
        (void)madvise(mem, mapped, MADV_HUGEPAGE); /* a hint; fails harmlessly */
    if (mapped <= BATON_POPULATE_MAX_BYTES)
        (void)madvise(mem, mapped, BATON_MADV_POPULATE_WRITE); /* why: at its #define */
}

int baton_handles_alloc_capped(struct baton_handle_table *t, uint64_t session, uint64_t size,
                               uint64_t session_cap, uint64_t extra_bytes, uint64_t *handle)
{
    uint64_t mapped;
    uint32_t index;
    if (size == 0 || session == 0)
        return BATON_E_INVAL;
    /* whole pages; every sum below is checked without wrapping
     * (core/access.h, proven) */
    if (baton_access_round_up(size, t->page, &mapped) != 0)
        return BATON_E_QUOTA;
    if (baton_access_quota(0, extra_bytes, mapped, session_cap) != 0)
        return BATON_E_QUOTA;

    pthread_mutex_lock(&t->table_lock);
    if (baton_access_quota(t->used_bytes, 0, mapped, t->total_bytes) != 0) {
        pthread_mutex_unlock(&t->table_lock);
        return BATON_E_QUOTA;
    }
    if (session_cap != UINT64_MAX &&
        baton_access_quota(session_bytes_locked(t, session), extra_bytes, mapped,
                           session_cap) != 0) {
        pthread_mutex_unlock(&t->table_lock);
        return BATON_E_QUOTA;
    }
    if (t->n_free == 0) {
        pthread_mutex_unlock(&t->table_lock);
        return BATON_E_LIMIT;
    }
    index = t->free_idx[--t->n_free];
    t->e[index].state = SLOT_RESERVED;
    t->e[index].owner = session; /* counted for the session from now on */
    t->e[index].mapped = mapped;
    t->used_bytes += mapped;
    pthread_mutex_unlock(&t->table_lock);

    void *mem = mmap(NULL, mapped, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (mem != MAP_FAILED)
        baton_handles_prefault(mem, mapped);

    pthread_mutex_lock(&t->table_lock);
    struct handle_entry *e = &t->e[index];
    if (mem == MAP_FAILED) {
        e->state = SLOT_EMPTY;
        e->owner = 0;
        e->mapped = 0;
        t->free_idx[t->n_free++] = index;
        t->used_bytes -= mapped;
        pthread_mutex_unlock(&t->table_lock);
        return BATON_E_NOMEM;
    }
    /* the slack after size, up to the page end, is no part of the buffer */
    POISON((uint8_t *)mem + size, mapped - size);
    e->mem = mem;
    e->size = size;
    e->mapped = mapped;
    e->owner = session;
    e->pins = 0;
    e->state = SLOT_LIVE;
    *handle = baton_access_handle_make(e->generation, index);
    pthread_mutex_unlock(&t->table_lock);
    return 0;
}

int baton_handles_free(struct baton_handle_table *t, uint64_t session, uint64_t handle)
{
    struct handle_entry *e;
    uint8_t *mem = NULL;
    uint64_t mapped = 0;
    pthread_mutex_lock(&t->table_lock);
    int rc = lookup(t, session, handle, &e);
    if (rc == 0)
        retire(t, e, &mem, &mapped);
    pthread_mutex_unlock(&t->table_lock);
    unmap_and_uncharge(t, mem, mapped);
    return rc;
}

int baton_handles_acquire(struct baton_handle_table *t, uint64_t session, uint64_t handle,
                          struct baton_buf_ref *ref)
{
    struct handle_entry *e;
    pthread_mutex_lock(&t->table_lock);
    int rc = lookup(t, session, handle, &e);
    if (rc == 0) {
        e->pins++;
        ref->mem = e->mem;
        ref->size = e->size;
        ref->index = (uint32_t)(e - t->e);
    }
    pthread_mutex_unlock(&t->table_lock);
    return rc;
}

int baton_handles_acquire_any(struct baton_handle_table *t, uint64_t handle,
                              struct baton_buf_ref *ref)
{
    uint64_t owner = 0;
    pthread_mutex_lock(&t->table_lock);
    uint64_t index = handle & 0xFFFFFFFFull;
    if (index < BATON_MAX_BUFFERS)
        owner = t->e[index].owner;
    pthread_mutex_unlock(&t->table_lock);
    /* owner 0 is no session's: lookup refuses it as stale or not owned */
    int rc = owner ? baton_handles_acquire(t, owner, handle, ref) : BATON_E_STALE_HANDLE;
    return rc == BATON_E_NOT_OWNED ? BATON_E_STALE_HANDLE : rc;
}

void baton_handles_release(struct baton_handle_table *t, const struct baton_buf_ref *ref)
{
    uint8_t *mem = NULL;
    uint64_t mapped = 0;
    pthread_mutex_lock(&t->table_lock);
    struct handle_entry *e = &t->e[ref->index];
    if (e->pins > 0)
        e->pins--;
    if (e->pins == 0 && e->state == SLOT_DYING) {
        mem = e->mem;
        mapped = e->mapped;
        e->mem = NULL;
        e->size = 0;
        e->mapped = 0;
        e->owner = 0;
        e->state = SLOT_EMPTY;
        t->free_idx[t->n_free++] = ref->index;
    }
    pthread_mutex_unlock(&t->table_lock);
    unmap_and_uncharge(t, mem, mapped);
}

uint32_t baton_handles_free_session(struct baton_handle_table *t, uint64_t session)
{
    uint32_t n = 0;
    if (session == 0)
        return 0;
    /* one entry per lock hold, so munmap never runs under the lock */
    for (uint32_t i = 0; i < BATON_MAX_BUFFERS; i++) {
        uint8_t *mem = NULL;
        uint64_t mapped = 0;
        pthread_mutex_lock(&t->table_lock);
        struct handle_entry *e = &t->e[i];
        int hit = e->state == SLOT_LIVE && e->owner == session;
        if (hit)
            retire(t, e, &mem, &mapped);
        pthread_mutex_unlock(&t->table_lock);
        unmap_and_uncharge(t, mem, mapped);
        n += (uint32_t)hit;
    }
    return n;
}

int baton_handles_charge(struct baton_handle_table *t, uint64_t bytes)
{
    int rc = 0;
    pthread_mutex_lock(&t->table_lock);
    if (baton_access_quota(t->used_bytes, 0, bytes, t->total_bytes) != 0)
        rc = BATON_E_QUOTA;
    else
        t->used_bytes += bytes;
    pthread_mutex_unlock(&t->table_lock);
    return rc;
}

void baton_handles_uncharge(struct baton_handle_table *t, uint64_t bytes)
{
    pthread_mutex_lock(&t->table_lock);
    t->used_bytes = bytes <= t->used_bytes ? t->used_bytes - bytes : 0;
    pthread_mutex_unlock(&t->table_lock);
}

void baton_handles_usage(struct baton_handle_table *t, uint64_t *used_bytes,
                         uint64_t *total_bytes, uint32_t *n_mapped)
{
    pthread_mutex_lock(&t->table_lock);
    if (used_bytes)
        *used_bytes = t->used_bytes;
    if (total_bytes)
        *total_bytes = t->total_bytes;
    if (n_mapped) {
        uint32_t n = 0;
        for (uint32_t i = 0; i < BATON_MAX_BUFFERS; i++)
            n += t->e[i].mem != NULL;
        *n_mapped = n;
    }
    pthread_mutex_unlock(&t->table_lock);
}
