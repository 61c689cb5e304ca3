/* The server-wide buffer handle table (DESIGN.md, "Handles are opaque").
 *
 * A fixed table of BATON_MAX_BUFFERS entries: (index, generation, owner
 * session, pin count, size, memory). A handle is generation << 32 | index;
 * generations start at 1 and skip 0 when they wrap, so handle 0 (and any
 * handle with generation 0) is never valid. Buffers are anonymous mmap
 * (zeroed by the kernel, returned to the OS by munmap); under ASan the
 * mapping's bytes past a buffer's size are poisoned, so an access beyond
 * the buffer inside its last page is reported.
 *
 * Freeing bumps the generation at once, so every later lookup of the old
 * handle gives BATON_E_STALE_HANDLE; the memory itself is unmapped (and
 * stays counted against the quota) until the last pin is released.
 *
 * One small mutex ("table_lock") guards the entries and the memory
 * accounting; it is never held across mmap/munmap or network I/O.
 * Session ids are non-zero u64 chosen by the server.
 */
#ifndef BATON_SERVER_HANDLES_H
#define BATON_SERVER_HANDLES_H

#include <stdint.h>

struct baton_handle_table;

/* A pinned buffer: valid until baton_handles_release. mem has size bytes. */
struct baton_buf_ref {
    uint8_t *mem;
    uint64_t size;
    uint32_t index;
};

/* Creates an empty table whose buffers (plus charges) may use at most
 * total_bytes of memory, counted in whole pages. Returns 0 or
 * BATON_E_NOMEM. Owned by the caller (baton_handles_destroy). */
int baton_handles_create(uint64_t total_bytes, struct baton_handle_table **out);

/* Unmaps every buffer, pinned or not; the caller guarantees no user is left. */
void baton_handles_destroy(struct baton_handle_table *t);

/* Allocates a zeroed buffer of size bytes (1 .. max) for session.
 * Returns 0 and *handle, or BATON_E_INVAL (size 0, session 0),
 * BATON_E_QUOTA (would exceed total_bytes), BATON_E_LIMIT (table full),
 * BATON_E_NOMEM (mmap failed). */
int baton_handles_alloc(struct baton_handle_table *t, uint64_t session, uint64_t size,
                        uint64_t *handle);

/* Asks the kernel for mem's mapped bytes (a fresh anonymous mapping,
 * whole pages) now: transparent huge pages where mapped is 2 MiB or more,
 * and every page faulted in, zeroed (MADV_POPULATE_WRITE), where mapped is
 * at most 1 GiB (handles.c says why, at BATON_MADV_POPULATE_WRITE). Both
 * are hints: on a kernel without them the pages fault in on first touch.
 * Used for buffers and for a session's scratch arena. */
void baton_handles_prefault(void *mem, uint64_t mapped);

/* baton_handles_alloc with a per-session cap: also BATON_E_QUOTA when the
 * session's mapped bytes (live buffers, and freed ones still pinned, page
 * rounded) plus extra_bytes (its scratch arena) plus this buffer's mapped
 * size would exceed session_cap. Checked under the table lock, before
 * anything is mapped. */
int baton_handles_alloc_capped(struct baton_handle_table *t, uint64_t session, uint64_t size,
                               uint64_t session_cap, uint64_t extra_bytes, uint64_t *handle);

/* The bytes session's buffers hold mapped now (as counted by
 * baton_handles_alloc_capped, without extra_bytes). */
uint64_t baton_handles_session_bytes(struct baton_handle_table *t, uint64_t session);

/* Frees session's buffer: BATON_E_STALE_HANDLE for a freed or never issued
 * handle, BATON_E_NOT_OWNED for another session's. */
int baton_handles_free(struct baton_handle_table *t, uint64_t session, uint64_t handle);

/* Resolves and pins session's buffer (errors as baton_handles_free). Every
 * successful acquire needs exactly one baton_handles_release. */
int baton_handles_acquire(struct baton_handle_table *t, uint64_t session, uint64_t handle,
                          struct baton_buf_ref *ref);

/* baton_handles_acquire whatever the owner: for tests and fuzz harnesses
 * that check buffer contents from outside the session (never called by the
 * server). BATON_E_STALE_HANDLE for a handle that is not live. */
int baton_handles_acquire_any(struct baton_handle_table *t, uint64_t handle,
                              struct baton_buf_ref *ref);

/* Drops one pin; the last pin of a freed buffer unmaps it. */
void baton_handles_release(struct baton_handle_table *t, const struct baton_buf_ref *ref);

/* Frees every buffer of session (its pins delay the unmapping as above).
 * Returns the number of buffers freed. */
uint32_t baton_handles_free_session(struct baton_handle_table *t, uint64_t session);

/* Charges bytes (not page-rounded) against the memory total, for memory the
 * server maps outside the table (session scratch arenas). Returns 0 or
 * BATON_E_QUOTA. */
int baton_handles_charge(struct baton_handle_table *t, uint64_t bytes);
void baton_handles_uncharge(struct baton_handle_table *t, uint64_t bytes);

/* Memory in use (buffers still mapped, page-rounded, plus charges), the
 * total, and the number of mapped buffers (live or freed-but-pinned). */
void baton_handles_usage(struct baton_handle_table *t, uint64_t *used_bytes,
                         uint64_t *total_bytes, uint32_t *n_mapped);

#endif
