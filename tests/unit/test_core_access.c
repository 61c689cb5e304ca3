/* The address arithmetic of core/access.h on hand-computed cases, the
 * wrap-around edges an adding check would get wrong among them. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "baton/status.h"
#include "core/access.h"
#include "core/ops.h"

static void test_slice(void **state)
{
    uint64_t at = 77;
    (void)state;
    /* tensor [16, 48) of a 64-byte buffer; its bytes [8, 24) */
    assert_int_equal(baton_access_slice(16, 32, 8, 16, 64, &at), 0);
    assert_true(at == 24);
    assert_int_equal(baton_access_slice(16, 32, 0, 32, 48, &at), 0);
    assert_true(at == 16);
    at = 77;
    assert_int_equal(baton_access_slice(16, 32, 8, 25, 64, &at), BATON_E_BOUNDS);
    assert_int_equal(baton_access_slice(16, 32, 0, 32, 47, &at), BATON_E_BOUNDS);
    assert_int_equal(baton_access_slice(65, 0, 0, 0, 64, &at), BATON_E_BOUNDS);
    /* off + n wraps to 7: an adding check would accept it */
    assert_int_equal(baton_access_slice(0, 32, 8, UINT64_MAX, 64, &at), BATON_E_BOUNDS);
    /* t_offset + t_nbytes wraps to 15 */
    assert_int_equal(baton_access_slice(16, UINT64_MAX, 0, 1, 64, &at), BATON_E_BOUNDS);
    assert_true(at == 77);
    assert_int_equal(baton_access_slice(UINT64_MAX, 0, 0, 0, UINT64_MAX, &at), 0);
    assert_true(at == UINT64_MAX);
}

static void test_piece(void **state)
{
    uint64_t at = 7, k = 7;
    (void)state;
    assert_int_equal(baton_access_piece(100, 50, 0, 16, 150, &at, &k), 0);
    assert_true(at == 100 && k == 16);
    assert_int_equal(baton_access_piece(100, 50, 48, 16, 150, &at, &k), 0);
    assert_true(at == 148 && k == 2);
    at = k = 7;
    assert_int_equal(baton_access_piece(100, 50, 50, 16, 150, &at, &k), BATON_E_BOUNDS);
    assert_int_equal(baton_access_piece(100, 51, 0, 16, 150, &at, &k), BATON_E_BOUNDS);
    assert_int_equal(baton_access_piece(100, 50, 0, 0, 150, &at, &k), BATON_E_BOUNDS);
    assert_int_equal(baton_access_piece(UINT64_MAX, 2, 0, 1, 1, &at, &k), BATON_E_BOUNDS);
    assert_true(at == 7 && k == 7);
}

static void test_overlap(void **state)
{
    (void)state;
    assert_int_equal(baton_access_overlap(0, 10, 9, 1), 1);
    assert_int_equal(baton_access_overlap(0, 10, 10, 1), 0);
    assert_int_equal(baton_access_overlap(9, 1, 0, 10), 1);
    assert_int_equal(baton_access_overlap(10, 1, 0, 10), 0);
    assert_int_equal(baton_access_overlap(5, 0, 0, 10), 0);
    assert_int_equal(baton_access_overlap(0, 10, 5, 0), 0);
    /* near 2^64: a sum would wrap */
    assert_int_equal(baton_access_overlap(UINT64_MAX - 1, 1, 0, UINT64_MAX), 1);
    assert_int_equal(baton_access_overlap(UINT64_MAX, 1, 0, UINT64_MAX), 0);
}

static void test_handle(void **state)
{
    uint32_t index = 5, gen = 5;
    (void)state;
    assert_int_equal(baton_access_handle(3ull << 32 | 7, 4096, &index, &gen), 0);
    assert_int_equal(index, 7);
    assert_int_equal(gen, 3);
    assert_true(baton_access_handle_make(3, 7) == (3ull << 32 | 7));
    assert_true(baton_access_handle_make(UINT32_MAX, UINT32_MAX) == UINT64_MAX);
    index = gen = 5;
    assert_int_equal(baton_access_handle(7, 4096, &index, &gen), BATON_E_STALE_HANDLE);
    assert_int_equal(baton_access_handle(1ull << 32 | 4096, 4096, &index, &gen),
                     BATON_E_STALE_HANDLE);
    assert_int_equal(index, 5);
    assert_int_equal(gen, 5);
    assert_int_equal(baton_access_handle_entry(1, 3, 3, 9, 9), 0);
    assert_int_equal(baton_access_handle_entry(0, 3, 3, 9, 9), BATON_E_STALE_HANDLE);
    assert_int_equal(baton_access_handle_entry(1, 4, 3, 9, 9), BATON_E_STALE_HANDLE);
    assert_int_equal(baton_access_handle_entry(1, 3, 3, 8, 9), BATON_E_NOT_OWNED);
}

static void test_sizes(void **state)
{
    uint64_t out = 1;
    (void)state;
    assert_int_equal(baton_access_round_up(1, 4096, &out), 0);
    assert_true(out == 4096);
    assert_int_equal(baton_access_round_up(4096, 4096, &out), 0);
    assert_true(out == 4096);
    assert_int_equal(baton_access_round_up(0, 4096, &out), 0);
    assert_true(out == 0);
    out = 1;
    assert_int_equal(baton_access_round_up(UINT64_MAX - 4094, 4096, &out), BATON_E_OVERFLOW);
    assert_int_equal(baton_access_round_up(5, 0, &out), BATON_E_INVAL);
    assert_true(out == 1);
    assert_int_equal(baton_access_quota(10, 20, 30, 60), 0);
    assert_int_equal(baton_access_quota(10, 20, 31, 60), BATON_E_QUOTA);
    assert_int_equal(baton_access_quota(61, 0, 0, 60), BATON_E_QUOTA);
    assert_int_equal(baton_access_quota(1, UINT64_MAX, 1, UINT64_MAX), BATON_E_QUOTA);
    assert_true(baton_access_add_sat(2, 3) == 5);
    assert_true(baton_access_add_sat(UINT64_MAX, 1) == UINT64_MAX);
    /* scratch: twice 8192, at least n, whole pages; cap once over cap / 2 */
    assert_int_equal(baton_access_scratch_grow(8192, 100, 1 << 30, &out), 0);
    assert_true(out == 16384);
    assert_int_equal(baton_access_scratch_grow(8192, 20000, 1 << 30, &out), 0);
    assert_true(out == 20480);
    assert_int_equal(baton_access_scratch_grow(600, 700, 1000, &out), 0);
    assert_true(out == 4096);
    assert_int_equal(baton_access_scratch_fit(100, 50, 400, 1000, &out), 0);
    assert_true(out == 400);
    assert_int_equal(baton_access_scratch_fit(700, 50, 400, 1000, &out), 0);
    assert_true(out == 300);
    out = 1;
    assert_int_equal(baton_access_scratch_fit(700, 301, 400, 1000, &out), BATON_E_QUOTA);
    assert_true(out == 1);
}

static void test_graph_indices(void **state)
{
    const uint32_t N = BATON_SRC_NONE;
    uint32_t src[BATON_MAX_SRC] = {0, 4, N, N, N, N};
    uint32_t node = 9;
    (void)state;
    /* 3 leaves, node 2: sources < 5 */
    assert_int_equal(baton_access_node_srcs(src, 2, 3, 2), 0);
    src[1] = 5;
    assert_int_equal(baton_access_node_srcs(src, 2, 3, 2), BATON_E_GRAPH);
    src[1] = 4;
    assert_int_equal(baton_access_node_srcs(src, 1, 3, 2), BATON_E_GRAPH); /* slot 1 unused */
    assert_int_equal(baton_access_node_srcs(src, 0, 3, 2), BATON_E_GRAPH);
    assert_int_equal(baton_access_node_srcs(src, 7, 3, 2), BATON_E_GRAPH);
    assert_int_equal(baton_access_out_leaf(N, 3), 0);
    assert_int_equal(baton_access_out_leaf(2, 3), 0);
    assert_int_equal(baton_access_out_leaf(3, 3), BATON_E_GRAPH);
    assert_int_equal(baton_access_cache_leaves(1, 2, 3), 0);
    assert_int_equal(baton_access_cache_leaves(2, 2, 3), BATON_E_GRAPH);
    assert_int_equal(baton_access_cache_leaves(1, 3, 3), BATON_E_GRAPH);
    assert_int_equal(baton_access_index(2, 3), 0);
    assert_int_equal(baton_access_index(3, 3), BATON_E_GRAPH);
    assert_int_equal(baton_access_node_ref(4, 3, 2, &node), 0);
    assert_int_equal(node, 1);
    node = 9;
    assert_int_equal(baton_access_node_ref(5, 3, 2, &node), BATON_E_GRAPH);
    assert_int_equal(baton_access_node_ref(2, 3, 2, &node), BATON_E_GRAPH);
    assert_int_equal(node, 9);
}

static void test_run_fields(void **state)
{
    uint32_t index = 9;
    (void)state;
    assert_int_equal(baton_access_route(1, 2, &index), 0);
    assert_int_equal(index, 0);
    assert_int_equal(baton_access_route(2, 2, &index), 0);
    assert_int_equal(index, 1);
    index = 9;
    assert_int_equal(baton_access_route(0, 2, &index), BATON_E_NOT_FOUND);
    assert_int_equal(baton_access_route(3, 2, &index), BATON_E_NOT_FOUND);
    assert_int_equal(index, 9);
    assert_int_equal(baton_access_i32_count(4, 16), 0);
    assert_int_equal(baton_access_i32_count(4, 15), BATON_E_BOUNDS);
    assert_int_equal(baton_access_i32_count(UINT32_MAX, UINT64_MAX), 0);
    assert_int_equal(baton_access_i32_count(UINT32_MAX, 4ull * UINT32_MAX - 1), BATON_E_BOUNDS);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_slice),        cmocka_unit_test(test_piece),
        cmocka_unit_test(test_overlap),      cmocka_unit_test(test_handle),
        cmocka_unit_test(test_sizes),        cmocka_unit_test(test_graph_indices),
        cmocka_unit_test(test_run_fields),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
