/* The server's grant table (src/server/grants.c) and the peer-link backoff
 * schedule (src/server/peer_link.c): per-session cap, random non-zero
 * distinct ids, lookup, revoke by the owner only, removal by handle
 * (FREE_BUFFER) and by session (session end), per-session byte counters;
 * no overlapping grants of a session on one handle; a write's pieces land
 * only while it is current (not after a revoke or the owner's seal); the
 * index of the fence that failed; backoff 1 s, 2 s, 4 s ... capped. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "baton/status.h"
#include "server/server_internal.h"

static const uint8_t zero_id[BATON_GRANT_ID_BYTES];

static void test_cap_and_ids(void **state)
{
    struct grant_table *g;
    uint8_t ids[4][BATON_GRANT_ID_BYTES], extra[BATON_GRANT_ID_BYTES];
    struct grant e;
    (void)state;

    assert_int_equal(grants_create(3, &g), 0);
    for (int i = 0; i < 3; i++) {
        assert_int_equal(grants_add(g, 7, 0x100000001ull, 64u * i, 64, ids[i]), 0);
        assert_memory_not_equal(ids[i], zero_id, sizeof zero_id);
        for (int j = 0; j < i; j++)
            assert_memory_not_equal(ids[i], ids[j], BATON_GRANT_ID_BYTES);
    }
    assert_int_equal(grants_add(g, 7, 0x100000001ull, 192, 1, extra), BATON_E_LIMIT);
    /* another session has its own cap */
    assert_int_equal(grants_add(g, 8, 0x100000002ull, 0, 16, ids[3]), 0);
    for (int i = 0; i < 3; i++) {
        assert_int_equal(grants_find(g, ids[i], &e), 0);
        assert_true(e.owner == 7 && e.handle == 0x100000001ull && e.offset == 64u * (uint64_t)i &&
                    e.length == 64);
        assert_memory_equal(e.id, ids[i], BATON_GRANT_ID_BYTES);
    }
    uint32_t n;
    grants_session_info(g, 7, NULL, &n);
    assert_int_equal(n, 3);
    grants_session_info(g, 9, NULL, &n);
    assert_int_equal(n, 0);
    grants_destroy(g);
}

static void test_revoke_and_drop(void **state)
{
    struct grant_table *g;
    uint8_t a[BATON_GRANT_ID_BYTES], b[BATON_GRANT_ID_BYTES], c[BATON_GRANT_ID_BYTES],
        d[BATON_GRANT_ID_BYTES];
    struct grant e;
    uint64_t bytes;
    uint32_t n;
    (void)state;

    assert_int_equal(grants_create(8, &g), 0);
    assert_int_equal(grants_add(g, 1, 0x100000005ull, 0, 8, a), 0);
    assert_int_equal(grants_add(g, 1, 0x100000005ull, 8, 8, b), 0);
    assert_int_equal(grants_add(g, 1, 0x100000006ull, 0, 8, c), 0);
    assert_int_equal(grants_add(g, 2, 0x100000007ull, 0, 8, d), 0);

    /* only the owner revokes */
    assert_int_equal(grants_revoke(g, 2, a), BATON_E_NOT_FOUND);
    assert_int_equal(grants_find(g, a, &e), 0);
    assert_int_equal(grants_revoke(g, 1, a), 0);
    assert_int_equal(grants_find(g, a, &e), BATON_E_NOT_FOUND);
    assert_int_equal(grants_revoke(g, 1, a), BATON_E_NOT_FOUND);

    /* counters per owner */
    grants_add_received(g, 1, 100);
    grants_add_received(g, 1, 28);
    grants_add_received(g, 2, 5);
    grants_add_received(g, 3, 1000); /* no such owner: dropped */
    grants_session_info(g, 1, &bytes, &n);
    assert_true(bytes == 128 && n == 2);
    grants_session_info(g, 3, &bytes, &n);
    assert_true(bytes == 0 && n == 0);

    /* FREE_BUFFER: the handle's grants go, the others stay */
    grants_drop_handle(g, 1, 0x100000005ull);
    assert_int_equal(grants_find(g, b, &e), BATON_E_NOT_FOUND);
    assert_int_equal(grants_find(g, c, &e), 0);
    /* the same handle value of another session is not touched */
    grants_drop_handle(g, 1, 0x100000007ull);
    assert_int_equal(grants_find(g, d, &e), 0);

    /* session end: its grants and counters go */
    grants_drop_session(g, 1);
    assert_int_equal(grants_find(g, c, &e), BATON_E_NOT_FOUND);
    grants_session_info(g, 1, &bytes, &n);
    assert_true(bytes == 0 && n == 0);
    grants_session_info(g, 2, &bytes, &n);
    assert_true(bytes == 5 && n == 1);
    assert_int_equal(grants_find(g, d, &e), 0);
    grants_destroy(g);
}

static void test_zero_cap(void **state)
{
    struct grant_table *g;
    uint8_t a[BATON_GRANT_ID_BYTES];
    (void)state;
    assert_int_equal(grants_create(0, &g), 0);
    assert_int_equal(grants_add(g, 1, 0x100000000ull, 0, 8, a), BATON_E_LIMIT);
    grants_destroy(g);
}

static void test_overlap(void **state)
{
    struct grant_table *g;
    uint8_t a[BATON_GRANT_ID_BYTES], b[BATON_GRANT_ID_BYTES];
    (void)state;
    assert_int_equal(grants_create(8, &g), 0);
    assert_int_equal(grants_add(g, 1, 0x100000001ull, 64, 64, a), 0);
    assert_int_equal(grants_add(g, 1, 0x100000001ull, 127, 1, b), BATON_E_INVAL);
    assert_int_equal(grants_add(g, 1, 0x100000001ull, 0, 65, b), BATON_E_INVAL);
    assert_int_equal(grants_add(g, 1, 0x100000001ull, 32, 256, b), BATON_E_INVAL);
    assert_int_equal(grants_add(g, 1, 0x100000001ull, 0, 64, b), 0);   /* adjacent */
    assert_int_equal(grants_revoke(g, 1, b), 0);
    assert_int_equal(grants_add(g, 1, 0x100000001ull, 128, 8, b), 0);  /* adjacent */
    assert_int_equal(grants_revoke(g, 1, b), 0);
    assert_int_equal(grants_add(g, 1, 0x100000002ull, 64, 64, b), 0);  /* another buffer */
    assert_int_equal(grants_revoke(g, 1, b), 0);
    assert_int_equal(grants_add(g, 2, 0x100000001ull, 64, 64, b), 0);  /* another session */
    assert_int_equal(grants_revoke(g, 1, a), 0);
    assert_int_equal(grants_add(g, 1, 0x100000001ull, 64, 64, a), 0);  /* after the revoke */
    grants_destroy(g);
}

static void test_land_seal_revoke(void **state)
{
    struct grant_table *g;
    uint8_t a[BATON_GRANT_ID_BYTES];
    struct grant e;
    uint8_t dst[8] = {0}, src[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    (void)state;
    assert_int_equal(grants_create(8, &g), 0);
    assert_int_equal(grants_add(g, 1, 0x100000001ull, 0, 8, a), 0);
    uint64_t far = UINT64_MAX;
    /* a landed write no longer passes a fence once sealed */
    uint32_t failed = 9;
    assert_int_equal(grants_write_begin(g, a, 1, far, &e), 0);
    grants_write_end(g, a, 1, 1);
    assert_int_equal(grants_seal(g, 1, a, 2), 0);
    assert_int_equal(grants_fence_wait(g, 1, (const uint8_t(*)[BATON_GRANT_ID_BYTES])&a,
                                       (uint64_t[]){1}, 1, far, NULL, NULL, &failed),
                     BATON_E_FENCE);
    assert_int_equal(failed, 0);
    /* a current write lands */
    assert_int_equal(grants_write_begin(g, a, 3, far, &e), 0);
    assert_int_equal(grants_write_land(g, a, 3, dst, src, 4), 0);
    assert_memory_equal(dst, src, 4);
    /* the owner's seal voids it: nothing more lands, its end is ignored */
    assert_int_equal(grants_seal(g, 2, a, 5), BATON_E_NOT_FOUND); /* not the owner */
    assert_int_equal(grants_seal(g, 1, a, 3), BATON_E_FENCE);     /* not newer */
    assert_int_equal(grants_seal(g, 1, a, 5), 0);
    assert_int_equal(grants_write_land(g, a, 3, dst + 4, src + 4, 4), BATON_E_FENCE);
    assert_memory_equal(dst + 4, (uint8_t[4]){0}, 4);
    grants_write_end(g, a, 3, 1);
    assert_int_equal(grants_find(g, a, &e), 0);
    assert_true(e.last_seq == 5 && e.failed_seq == 5 && e.writing == 0 && e.landed_seq == 0);
    /* writes up to 5 are refused; 6 lands */
    assert_int_equal(grants_write_begin(g, a, 5, far, &e), BATON_E_FENCE);
    assert_int_equal(grants_write_begin(g, a, 6, far, &e), 0);
    /* a peer's cancel does not void a write in progress */
    assert_int_equal(grants_cancel(g, a, 7), BATON_E_FENCE);
    /* a revoke does: the rest of the write finds no grant */
    assert_int_equal(grants_revoke(g, 1, a), 0);
    assert_int_equal(grants_write_land(g, a, 6, dst + 4, src + 4, 4), BATON_E_NOT_FOUND);
    assert_memory_equal(dst + 4, (uint8_t[4]){0}, 4);
    grants_write_end(g, a, 6, 0);
    grants_destroy(g);
}

static void test_fence_failed_index(void **state)
{
    struct grant_table *g;
    uint8_t ids[4][BATON_GRANT_ID_BYTES];
    uint64_t seqs[4] = {1, 1, 1, 9};
    struct grant e;
    uint32_t failed = 99;
    (void)state;
    assert_int_equal(grants_create(8, &g), 0);
    for (int i = 0; i < 4; i++) {
        assert_int_equal(grants_add(g, 1, 0x100000001ull, 8u * (uint64_t)i, 8, ids[i]), 0);
        if (i < 3) {
            assert_int_equal(grants_write_begin(g, ids[i], 1, UINT64_MAX, &e), 0);
            grants_write_end(g, ids[i], 1, 1);
        }
    }
    assert_int_equal(grants_cancel(g, ids[3], 9), 0);
    assert_int_equal(grants_fence_wait(g, 1, (const uint8_t(*)[BATON_GRANT_ID_BYTES])ids, seqs,
                                       4, UINT64_MAX, NULL, NULL, &failed),
                     BATON_E_FENCE);
    assert_int_equal(failed, 3);
    seqs[3] = 1;
    seqs[1] = 0; /* older than what grant 1 has seen */
    assert_int_equal(grants_fence_wait(g, 1, (const uint8_t(*)[BATON_GRANT_ID_BYTES])ids, seqs,
                                       4, UINT64_MAX, NULL, NULL, &failed),
                     BATON_E_FENCE);
    assert_int_equal(failed, 1);
    grants_destroy(g);
}

static void test_backoff(void **state)
{
    (void)state;
    assert_int_equal(server_backoff_delay_ms(1, 60000), 1000);
    assert_int_equal(server_backoff_delay_ms(2, 60000), 2000);
    assert_int_equal(server_backoff_delay_ms(3, 60000), 4000);
    assert_int_equal(server_backoff_delay_ms(6, 60000), 32000);
    assert_int_equal(server_backoff_delay_ms(7, 60000), 60000);
    assert_int_equal(server_backoff_delay_ms(UINT32_MAX, 60000), 60000);
    assert_int_equal(server_backoff_delay_ms(1, 1500), 1000);
    assert_int_equal(server_backoff_delay_ms(2, 1500), 1500);
    assert_int_equal(server_backoff_delay_ms(40, 86400000), 86400000);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cap_and_ids),
        cmocka_unit_test(test_revoke_and_drop),
        cmocka_unit_test(test_zero_cap),
        cmocka_unit_test(test_overlap),
        cmocka_unit_test(test_land_seal_revoke),
        cmocka_unit_test(test_fence_failed_index),
        cmocka_unit_test(test_backoff),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
