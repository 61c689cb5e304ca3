/* Split planner and graph builder tests (sampling: test_compute_ops.c, SAMPLE). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "baton/status.h"
#include "model/graph_builder.h"
#include "model/split.h"

static void split_equal_ties_to_earlier(void **state)
{
    double p[3] = {1, 1, 1};
    uint32_t c[3];

    (void)state;
    /* 5/3 = 1.67 each: floors 1,1,1; two left over go to stages 1 and 2 */
    assert_int_equal(baton_split_plan(5, p, 3, c), 0);
    assert_int_equal(c[0], 2);
    assert_int_equal(c[1], 2);
    assert_int_equal(c[2], 1);
}

static void split_largest_remainder(void **state)
{
    double p[3] = {1, 2, 3};
    uint32_t c[3];

    (void)state;
    /* 10 layers: quotas 1.67, 3.33, 5.0 -> floors 1,3,5 (9); remainder .67 wins */
    assert_int_equal(baton_split_plan(10, p, 3, c), 0);
    assert_int_equal(c[0], 2);
    assert_int_equal(c[1], 3);
    assert_int_equal(c[2], 5);
}

static void split_rejects(void **state)
{
    double p[6] = {1, 1, 1, 1, 1, 1};
    double bad[2] = {1, 0};
    uint32_t c[6];

    (void)state;
    assert_int_equal(baton_split_plan(5, p, 6, c), BATON_E_INVAL); /* a stage gets none */
    assert_int_equal(baton_split_plan(5, bad, 2, c), BATON_E_INVAL);
    assert_int_equal(baton_split_plan(5, p, 0, c), BATON_E_INVAL);
}

static void split_parse(void **state)
{
    double p[4];

    (void)state;
    assert_int_equal(baton_split_parse("1,2.5,3", p, 4), 3);
    assert_true(p[1] == 2.5);
    assert_int_equal(baton_split_parse("1,,2", p, 4), BATON_E_INVAL);
    assert_int_equal(baton_split_parse("1,-2", p, 4), BATON_E_INVAL);
    assert_int_equal(baton_split_parse("1,x", p, 4), BATON_E_INVAL);
    assert_int_equal(baton_split_parse("", p, 4), BATON_E_INVAL);
    assert_int_equal(baton_split_parse("1,1,1,1,1", p, 4), BATON_E_INVAL);
    /* plain decimals only, each at most BATON_SPLIT_PART_MAX (an adversarial
     * review: 1e308,1,1 made the plan's sum infinite and its quotas NaN) */
    assert_int_equal(baton_split_parse("1e308,1,1", p, 4), BATON_E_INVAL);
    assert_int_equal(baton_split_parse("1e3", p, 4), BATON_E_INVAL);
    assert_int_equal(baton_split_parse(" 1", p, 4), BATON_E_INVAL);
    assert_int_equal(baton_split_parse("1, 1", p, 4), BATON_E_INVAL);
    assert_int_equal(baton_split_parse("0x10", p, 4), BATON_E_INVAL);
    assert_int_equal(baton_split_parse("+1", p, 4), BATON_E_INVAL);
    assert_int_equal(baton_split_parse("1..2", p, 4), BATON_E_INVAL);
    assert_int_equal(baton_split_parse(".", p, 4), BATON_E_INVAL);
    assert_int_equal(baton_split_parse("inf", p, 4), BATON_E_INVAL);
    assert_int_equal(baton_split_parse("0,1", p, 4), BATON_E_INVAL);
    assert_int_equal(baton_split_parse("1000000.5", p, 4), BATON_E_INVAL);
    assert_int_equal(baton_split_parse("1000000,.5,2.", p, 4), 3);
    assert_true(p[0] == 1e6 && p[1] == 0.5 && p[2] == 2.0);
    {
        /* proportions whose sum overflows (not from baton_split_parse) */
        const double big[3] = {1e308, 1e308, 1};
        uint32_t counts[3];

        assert_int_equal(baton_split_plan(12, big, 3, counts), BATON_E_INVAL);
    }
}

static void builder_rewrites_node_refs(void **state)
{
    struct baton_tensor_desc leaves[2] = {{0}};
    struct baton_graph_node nodes[2];
    struct baton_gb gb;
    const uint64_t ne[4] = {4, 1, 1, 1};
    uint32_t src[BATON_MAX_SRC] = {BATON_SRC_NONE, BATON_SRC_NONE, BATON_SRC_NONE,
                                   BATON_SRC_NONE, BATON_SRC_NONE, BATON_SRC_NONE};
    uint32_t a, b, n0, n1;

    (void)state;
    baton_gb_init(&gb, leaves, 2, nodes, 2);
    a = baton_gb_leaf(&gb, &leaves[0]);
    src[0] = a;
    n0 = baton_gb_node(&gb, BATON_OP_SILU, BATON_TYPE_F32, ne, src, NULL);
    b = baton_gb_leaf(&gb, &leaves[1]);
    src[0] = n0;
    src[1] = b;
    n1 = baton_gb_node(&gb, BATON_OP_ADD, BATON_TYPE_F32, ne, src, NULL);
    baton_gb_set_out(&gb, n1, b);
    assert_int_equal(baton_gb_finish(&gb), 0);
    assert_int_equal(gb.g.n_leaves, 2);
    assert_int_equal(gb.g.nodes[0].src[0], 0);
    assert_int_equal(gb.g.nodes[1].src[0], 2); /* node 0 = n_leaves + 0 */
    assert_int_equal(gb.g.nodes[1].src[1], 1);
    assert_int_equal(gb.g.nodes[1].out_leaf, 1);
    /* full builder reports BATON_E_LIMIT */
    src[0] = a;
    src[1] = BATON_SRC_NONE;
    assert_int_equal(baton_gb_node(&gb, BATON_OP_SILU, BATON_TYPE_F32, ne, src, NULL),
                     BATON_SRC_NONE);
    assert_int_equal(gb.error, BATON_E_LIMIT);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(split_equal_ties_to_earlier),
        cmocka_unit_test(split_largest_remainder),
        cmocka_unit_test(split_rejects),
        cmocka_unit_test(split_parse),
        cmocka_unit_test(builder_rewrites_node_refs),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
