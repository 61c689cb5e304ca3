/* The server's grant table (src/server/grants.c) and the peer-link backoff
 * schedule (src/server/peer_link.c): per-session cap, random non-zero
 * distinct ids, lookup, revoke by the owner only, removal by handle
 * (FREE_BUFFER) and by session (session end), per-session byte counters;
 * backoff 1 s, 2 s, 4 s ... capped. */
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
    assert_int_equal(grants_add(g, 7, 0x100000001ull, 0, 1, extra), BATON_E_LIMIT);
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
        cmocka_unit_test(test_backoff),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
