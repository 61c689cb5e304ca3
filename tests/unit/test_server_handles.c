/* src/server/handles.c: the server-wide buffer handle table. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cmocka.h>

#include "baton/status.h"
#include "core/limits.h"
#include "server/handles.h"

#define S1 11u
#define S2 22u

static uint64_t page(void)
{
    return (uint64_t)sysconf(_SC_PAGESIZE);
}

static void test_alloc_lookup_free(void **state)
{
    struct baton_handle_table *t;
    struct baton_buf_ref r;
    uint64_t h, used, total;
    uint32_t n;
    assert_int_equal(baton_handles_create(1u << 20, &t), 0);
    assert_int_equal(baton_handles_alloc(t, S1, 100, &h), 0);
    /* first handle: index 0, generation 1 */
    assert_true(h == (1ull << 32 | 0));
    assert_int_equal(baton_handles_acquire(t, S1, h, &r), 0);
    assert_int_equal(r.size, 100);
    for (int i = 0; i < 100; i++)
        assert_int_equal(r.mem[i], 0); /* zeroed */
    memset(r.mem, 0xAB, 100);
    baton_handles_release(t, &r);
    baton_handles_usage(t, &used, &total, &n);
    assert_int_equal(used, page()); /* counted in whole pages */
    assert_int_equal(total, 1u << 20);
    assert_int_equal(n, 1);
    assert_int_equal(baton_handles_free(t, S1, h), 0);
    baton_handles_usage(t, &used, NULL, &n);
    assert_int_equal(used, 0);
    assert_int_equal(n, 0);
    baton_handles_destroy(t);
}

/* True when this kernel knows MADV_POPULATE_WRITE (Linux 5.14): asked of
 * a scratch mapping, since handles.c ignores the call's result. */
static int kernel_populates(void)
{
    const size_t len = (size_t)page();
    void *m = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    int ok;
    assert_true(m != MAP_FAILED);
    ok = madvise(m, len, 23 /* MADV_POPULATE_WRITE */) == 0;
    munmap(m, len);
    return ok;
}

/* A buffer's pages are resident as soon as ALLOC_BUFFER returns, so no
 * compute step (the KV cache's first write to a slot) takes the page
 * fault; and they read as zero. */
static void test_alloc_populates(void **state)
{
    struct baton_handle_table *t;
    struct baton_buf_ref r;
    const uint64_t n_pages = 40;
    unsigned char vec[40];
    uint64_t h;
    (void)state;
    if (!kernel_populates())
        skip();
    assert_int_equal(baton_handles_create(n_pages * page(), &t), 0);
    assert_int_equal(baton_handles_alloc(t, S1, n_pages * page(), &h), 0);
    assert_int_equal(baton_handles_acquire(t, S1, h, &r), 0);
    memset(vec, 0, sizeof(vec));
    /* r.mem is the mapping's start (page-aligned), untouched by this test */
    assert_int_equal(mincore(r.mem, n_pages * page(), vec), 0);
    for (uint64_t i = 0; i < n_pages; i++)
        assert_true(vec[i] & 1);
    for (uint64_t i = 0; i < n_pages * page(); i += 997)
        assert_int_equal(r.mem[i], 0);
    baton_handles_release(t, &r);
    assert_int_equal(baton_handles_free(t, S1, h), 0);
    baton_handles_destroy(t);
}

/* Above 1 GiB (handles.c, BATON_POPULATE_MAX_BYTES) a buffer is not
 * populated: its pages fault in on first touch. */
static void test_alloc_large_not_populated(void **state)
{
    struct baton_handle_table *t;
    struct baton_buf_ref r;
    const uint64_t size = (1ull << 30) + page();
    unsigned char vec[40];
    uint64_t h;
    (void)state;
    if (!kernel_populates())
        skip();
    assert_int_equal(baton_handles_create(size, &t), 0);
    assert_int_equal(baton_handles_alloc(t, S1, size, &h), 0);
    assert_int_equal(baton_handles_acquire(t, S1, h, &r), 0);
    assert_int_equal(mincore(r.mem, 40 * page(), vec), 0);
    for (int i = 0; i < 40; i++)
        assert_false(vec[i] & 1);
    baton_handles_release(t, &r);
    assert_int_equal(baton_handles_free(t, S1, h), 0);
    baton_handles_destroy(t);
}

static void test_stale_generation(void **state)
{
    struct baton_handle_table *t;
    struct baton_buf_ref r;
    uint64_t h1, h2;
    assert_int_equal(baton_handles_create(1u << 20, &t), 0);
    assert_int_equal(baton_handles_alloc(t, S1, 64, &h1), 0);
    assert_int_equal(baton_handles_free(t, S1, h1), 0);
    assert_int_equal(baton_handles_free(t, S1, h1), BATON_E_STALE_HANDLE);
    assert_int_equal(baton_handles_acquire(t, S1, h1, &r), BATON_E_STALE_HANDLE);
    /* the slot comes back with the next generation, and is zeroed again */
    assert_int_equal(baton_handles_alloc(t, S1, 64, &h2), 0);
    assert_true(h2 == (2ull << 32 | 0));
    assert_int_equal(baton_handles_acquire(t, S1, h1, &r), BATON_E_STALE_HANDLE);
    assert_int_equal(baton_handles_acquire(t, S1, h2, &r), 0);
    assert_int_equal(r.mem[0], 0);
    baton_handles_release(t, &r);
    /* never issued: generation 0, index out of range, an unused slot */
    assert_int_equal(baton_handles_acquire(t, S1, 0, &r), BATON_E_STALE_HANDLE);
    assert_int_equal(baton_handles_acquire(t, S1, 3, &r), BATON_E_STALE_HANDLE);
    assert_int_equal(baton_handles_acquire(t, S1, 1ull << 32 | BATON_MAX_BUFFERS, &r),
                     BATON_E_STALE_HANDLE);
    assert_int_equal(baton_handles_acquire(t, S1, 1ull << 32 | 7, &r), BATON_E_STALE_HANDLE);
    assert_int_equal(baton_handles_acquire(t, S1, UINT64_MAX, &r), BATON_E_STALE_HANDLE);
    baton_handles_destroy(t);
}

static void test_other_owner(void **state)
{
    struct baton_handle_table *t;
    struct baton_buf_ref r;
    uint64_t h;
    assert_int_equal(baton_handles_create(1u << 20, &t), 0);
    assert_int_equal(baton_handles_alloc(t, S1, 64, &h), 0);
    assert_int_equal(baton_handles_acquire(t, S2, h, &r), BATON_E_NOT_OWNED);
    assert_int_equal(baton_handles_free(t, S2, h), BATON_E_NOT_OWNED);
    assert_int_equal(baton_handles_acquire(t, S1, h, &r), 0); /* still there */
    baton_handles_release(t, &r);
    /* a session's end frees only its own buffers */
    uint64_t h2;
    assert_int_equal(baton_handles_alloc(t, S2, 64, &h2), 0);
    assert_int_equal(baton_handles_free_session(t, S2), 1);
    assert_int_equal(baton_handles_acquire(t, S2, h2, &r), BATON_E_STALE_HANDLE);
    assert_int_equal(baton_handles_acquire(t, S1, h, &r), 0);
    baton_handles_release(t, &r);
    assert_int_equal(baton_handles_free_session(t, S1), 1);
    assert_int_equal(baton_handles_acquire(t, S1, h, &r), BATON_E_STALE_HANDLE);
    assert_int_equal(baton_handles_alloc(t, 0, 64, &h), BATON_E_INVAL);
    assert_int_equal(baton_handles_alloc(t, S1, 0, &h), BATON_E_INVAL);
    baton_handles_destroy(t);
}

static void test_pins_delay_release(void **state)
{
    struct baton_handle_table *t;
    struct baton_buf_ref r1, r2, r3;
    uint64_t h, h2, used;
    uint32_t n;
    assert_int_equal(baton_handles_create(4 * page(), &t), 0);
    assert_int_equal(baton_handles_alloc(t, S1, 2 * page(), &h), 0);
    assert_int_equal(baton_handles_acquire(t, S1, h, &r1), 0);
    assert_int_equal(baton_handles_acquire(t, S1, h, &r2), 0);
    r1.mem[0] = 5;
    assert_int_equal(baton_handles_free(t, S1, h), 0);
    /* stale at once, but still mapped and counted while pinned */
    assert_int_equal(baton_handles_acquire(t, S1, h, &r3), BATON_E_STALE_HANDLE);
    baton_handles_usage(t, &used, NULL, &n);
    assert_int_equal(used, 2 * page());
    assert_int_equal(n, 1);
    assert_int_equal(r2.mem[0], 5); /* the pinned memory is still valid */
    /* the quota still counts it: 3 more pages do not fit */
    assert_int_equal(baton_handles_alloc(t, S1, 3 * page(), &h2), BATON_E_QUOTA);
    baton_handles_release(t, &r1);
    baton_handles_usage(t, &used, NULL, &n);
    assert_int_equal(n, 1);
    baton_handles_release(t, &r2);
    baton_handles_usage(t, &used, NULL, &n);
    assert_int_equal(used, 0);
    assert_int_equal(n, 0);
    assert_int_equal(baton_handles_alloc(t, S1, 3 * page(), &h2), 0);
    /* the dying slot was not reused while pinned; now it is, a generation on */
    assert_true((h2 & 0xFFFFFFFFu) == (h & 0xFFFFFFFFu));
    assert_true((h2 >> 32) == (h >> 32) + 1);
    baton_handles_destroy(t);
}

static void test_session_end_with_pin(void **state)
{
    struct baton_handle_table *t;
    struct baton_buf_ref r;
    uint64_t h;
    uint32_t n;
    assert_int_equal(baton_handles_create(1u << 20, &t), 0);
    assert_int_equal(baton_handles_alloc(t, S1, 64, &h), 0);
    assert_int_equal(baton_handles_acquire(t, S1, h, &r), 0);
    assert_int_equal(baton_handles_free_session(t, S1), 1);
    baton_handles_usage(t, NULL, NULL, &n);
    assert_int_equal(n, 1);
    baton_handles_release(t, &r);
    baton_handles_usage(t, NULL, NULL, &n);
    assert_int_equal(n, 0);
    baton_handles_destroy(t);
}

static void test_quota_and_charge(void **state)
{
    struct baton_handle_table *t;
    uint64_t h1, h2, h3, used;
    assert_int_equal(baton_handles_create(3 * page(), &t), 0);
    assert_int_equal(baton_handles_alloc(t, S1, 1, &h1), 0); /* one page */
    assert_int_equal(baton_handles_alloc(t, S1, 2 * page() + 1, &h2), BATON_E_QUOTA);
    assert_int_equal(baton_handles_alloc(t, S1, 2 * page(), &h2), 0);
    assert_int_equal(baton_handles_alloc(t, S1, 1, &h3), BATON_E_QUOTA);
    assert_int_equal(baton_handles_alloc(t, S1, UINT64_MAX, &h3), BATON_E_QUOTA);
    assert_int_equal(baton_handles_charge(t, 1), BATON_E_QUOTA);
    assert_int_equal(baton_handles_free(t, S1, h1), 0);
    assert_int_equal(baton_handles_charge(t, page()), 0);
    baton_handles_usage(t, &used, NULL, NULL);
    assert_int_equal(used, 3 * page());
    assert_int_equal(baton_handles_alloc(t, S1, 1, &h3), BATON_E_QUOTA);
    baton_handles_uncharge(t, page());
    assert_int_equal(baton_handles_alloc(t, S1, 1, &h3), 0);
    baton_handles_destroy(t);
}

static void test_table_full(void **state)
{
    struct baton_handle_table *t;
    uint64_t h;
    assert_int_equal(baton_handles_create((uint64_t)(BATON_MAX_BUFFERS + 1) * page(), &t), 0);
    for (uint32_t i = 0; i < BATON_MAX_BUFFERS; i++) {
        assert_int_equal(baton_handles_alloc(t, S1, 1, &h), 0);
        assert_int_equal(h & 0xFFFFFFFFu, i);
    }
    assert_int_equal(baton_handles_alloc(t, S2, 1, &h), BATON_E_LIMIT);
    assert_int_equal(baton_handles_free_session(t, S1), BATON_MAX_BUFFERS);
    assert_int_equal(baton_handles_alloc(t, S2, 1, &h), 0);
    baton_handles_destroy(t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_alloc_lookup_free),
        cmocka_unit_test(test_alloc_populates),
        cmocka_unit_test(test_alloc_large_not_populated),
        cmocka_unit_test(test_stale_generation),
        cmocka_unit_test(test_other_owner),
        cmocka_unit_test(test_pins_delay_release),
        cmocka_unit_test(test_session_end_with_pin),
        cmocka_unit_test(test_quota_and_charge),
        cmocka_unit_test(test_table_full),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
