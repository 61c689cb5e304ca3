/* Graph validation failures, scratch layout, out leaves, chained nodes and
 * determinism across thread counts and batch sizes. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "compute/cpu/kernels.h"
#include "compute/cpu/matmul.h"
#include "compute/cpu/quant.h"
#include "test_compute_util.h"

/* ---- validation ---- */

/* Changes a leaf's block type between Q8_0 and Q4_0, fixing its strides. */
static void t_leaf_type(struct tg *t, uint32_t leaf, uint32_t type)
{
    struct baton_tensor_desc *d = &t->leaves[leaf];
    const uint64_t bb = type == BATON_TYPE_Q4_0 ? 18 : 34;

    d->type = type;
    d->nb[0] = bb;
    d->nb[1] = bb * (d->ne[0] / 32);
    d->nb[2] = d->nb[1] * d->ne[1];
    d->nb[3] = d->nb[2] * d->ne[2];
    d->nbytes = d->nb[3] * d->ne[3];
}

/* A valid base graph: W {3,2}, x {3,2} -> MUL_MAT {2,2} -> out leaf y. */
struct base {
    struct tg t;
    float w[6], x[6], y[4];
    uint32_t lw, lx, ly, n;
};

static void base_setup(struct base *b)
{
    tg_init(&b->t);
    memset(b->w, 0, sizeof(b->w));
    memset(b->x, 0, sizeof(b->x));
    b->lw = tg_leaf(&b->t, BATON_TYPE_F32, 3, 2, 1, 1, b->w);
    b->lx = tg_leaf(&b->t, BATON_TYPE_F32, 3, 2, 1, 1, b->x);
    b->ly = tg_leaf(&b->t, BATON_TYPE_F32, 2, 2, 1, 1, b->y);
    b->n = tg_node(&b->t, BATON_OP_MUL_MAT, BATON_TYPE_F32, 2, 2, 1, 1, SRC2(b->lw, b->lx), NULL);
    tg_at(&b->t, b->n)->out_leaf = b->ly;
}

static void test_valid_base(void **state)
{
    struct base b;

    (void)state;
    base_setup(&b);
    assert_int_equal(tg_validate(&b.t, 16), 0);
}

static void test_bad_arity_slot(void **state)
{
    struct base b;

    (void)state;
    base_setup(&b);
    tg_at(&b.t, b.n)->src[2] = b.lx; /* MUL_MAT has 2 sources */
    assert_int_equal(tg_validate(&b.t, 16), BATON_E_GRAPH);
    base_setup(&b);
    tg_at(&b.t, b.n)->src[1] = NONE; /* a used slot left empty */
    assert_int_equal(tg_validate(&b.t, 16), BATON_E_GRAPH);
}

static void test_unknown_op(void **state)
{
    struct base b;

    (void)state;
    base_setup(&b);
    tg_at(&b.t, b.n)->op = 0;
    assert_int_equal(tg_validate(&b.t, 16), BATON_E_GRAPH);
    tg_at(&b.t, b.n)->op = BATON_OP_COUNT;
    assert_int_equal(tg_validate(&b.t, 16), BATON_E_GRAPH);
}

static void test_source_from_later_node(void **state)
{
    struct tg t;
    float x[4] = {0};
    uint32_t lx, n0, n1;

    (void)state;
    tg_init(&t);
    lx = tg_leaf(&t, BATON_TYPE_F32, 4, 1, 1, 1, x);
    n0 = tg_node(&t, BATON_OP_SILU, BATON_TYPE_F32, 4, 1, 1, 1, SRC1(lx), NULL);
    n1 = tg_node(&t, BATON_OP_SILU, BATON_TYPE_F32, 4, 1, 1, 1, SRC1(n0), NULL);
    assert_int_equal(tg_validate(&t, 16), 0);
    tg_at(&t, n0)->src[0] = n1; /* node 0 reads node 1 */
    assert_int_equal(tg_validate(&t, 16), BATON_E_GRAPH);
    tg_at(&t, n0)->src[0] = n0; /* itself */
    assert_int_equal(tg_validate(&t, 16), BATON_E_GRAPH);
    tg_at(&t, n0)->src[0] = 1000; /* past everything */
    assert_int_equal(tg_validate(&t, 16), BATON_E_GRAPH);
}

static void test_shape_mismatch(void **state)
{
    struct base b;

    (void)state;
    base_setup(&b);
    b.t.leaves[b.lx].ne[0] = 2; /* K 3 vs 2 */
    b.t.leaves[b.lx].nb[1] = 8;
    b.t.leaves[b.lx].nb[2] = b.t.leaves[b.lx].nb[3] = 16;
    b.t.leaves[b.lx].nbytes = 16;
    assert_int_equal(tg_validate(&b.t, 16), BATON_E_SHAPE);

    base_setup(&b);
    tg_at(&b.t, b.n)->ne[1] = 3; /* declared shape differs from {2,2} */
    assert_int_equal(tg_validate(&b.t, 16), BATON_E_SHAPE);
}

static void test_broadcast_rules(void **state)
{
    struct tg t;
    float a[6] = {0}, b[2] = {0};
    uint32_t la, lb, n;

    (void)state;
    tg_init(&t);
    la = tg_leaf(&t, BATON_TYPE_F32, 3, 2, 1, 1, a);
    lb = tg_leaf(&t, BATON_TYPE_F32, 2, 1, 1, 1, b); /* 2 is neither 3 nor 1 */
    n = tg_node(&t, BATON_OP_ADD, BATON_TYPE_F32, 3, 2, 1, 1, SRC2(la, lb), NULL);
    assert_int_equal(tg_validate(&t, 16), BATON_E_SHAPE);
    /* a broadcast only goes from b to a: ADD(b {2}, a {3,2}) is a mismatch too */
    tg_at(&t, n)->src[0] = lb;
    tg_at(&t, n)->src[1] = la;
    tg_at(&t, n)->ne[0] = 2;
    tg_at(&t, n)->ne[1] = 1;
    assert_int_equal(tg_validate(&t, 16), BATON_E_SHAPE);
}

static void test_declared_type_wrong(void **state)
{
    struct base b;

    (void)state;
    base_setup(&b);
    tg_at(&b.t, b.n)->out_leaf = NONE;
    tg_at(&b.t, b.n)->type = BATON_TYPE_I32;
    assert_int_equal(tg_validate(&b.t, 16), BATON_E_TYPE);
    tg_at(&b.t, b.n)->type = 3; /* retired/unknown id */
    assert_int_equal(tg_validate(&b.t, 16), BATON_E_TYPE);
    tg_at(&b.t, b.n)->type = BATON_TYPE_F16; /* known, executable, but MUL_MAT gives F32 */
    assert_int_equal(tg_validate(&b.t, 16), BATON_E_TYPE);
}

static void test_source_type_wrong(void **state)
{
    struct tg t;
    float tab[4] = {0}, fids[2] = {0};
    uint32_t lt, li;

    (void)state;
    tg_init(&t);
    lt = tg_leaf(&t, BATON_TYPE_F32, 2, 2, 1, 1, tab);
    li = tg_leaf(&t, BATON_TYPE_F32, 2, 1, 1, 1, fids); /* ids must be I32 */
    tg_node(&t, BATON_OP_GET_ROWS, BATON_TYPE_F32, 2, 2, 1, 1, SRC2(lt, li), NULL);
    assert_int_equal(tg_validate(&t, 16), BATON_E_TYPE);
}

/* F16 / Q8_0 / Q4_0 are accepted as MUL_MAT weights and GET_ROWS tables
 * only; Q8_0 / Q4_0 weights reserve scratch for the quantized activations
 * (a group of up to 4 blocks takes 256 bytes per column). */
static void test_weight_types(void **state)
{
    struct base b;
    uint16_t h[6] = {0};
    uint8_t q[34 * 2] = {0};
    int32_t ids[1] = {0};
    float x32[64] = {0};
    uint32_t li, lq, n2;

    (void)state;
    base_setup(&b);
    b.t.g.n_leaves = 0;
    b.t.g.n_nodes = 0;
    b.lw = tg_leaf(&b.t, BATON_TYPE_F16, 3, 2, 1, 1, h);
    b.lx = tg_leaf(&b.t, BATON_TYPE_F32, 3, 2, 1, 1, b.x);
    b.n = tg_node(&b.t, BATON_OP_MUL_MAT, BATON_TYPE_F32, 2, 2, 1, 1, SRC2(b.lw, b.lx), NULL);
    assert_int_equal(tg_validate(&b.t, 16), 0);
    assert_int_equal(b.t.scratch_bytes, 64); /* the result only */
    tg_at(&b.t, b.n)->src[0] = b.lx; /* F16 as x: no */
    tg_at(&b.t, b.n)->src[1] = b.lw;
    assert_int_equal(tg_validate(&b.t, 16), BATON_E_TYPE);

    tg_init(&b.t);
    lq = tg_leaf(&b.t, BATON_TYPE_Q8_0, 32, 2, 1, 1, q);
    b.lx = tg_leaf(&b.t, BATON_TYPE_F32, 32, 2, 1, 1, x32);
    li = tg_leaf(&b.t, BATON_TYPE_I32, 1, 1, 1, 1, ids);
    b.n = tg_node(&b.t, BATON_OP_MUL_MAT, BATON_TYPE_F32, 2, 2, 1, 1, SRC2(lq, b.lx), NULL);
    assert_int_equal(tg_validate(&b.t, 16), 0);
    assert_int_equal(b.t.scratch_bytes, 64 + 2 * 256);
    t_leaf_type(&b.t, lq, BATON_TYPE_Q4_0);
    assert_int_equal(tg_validate(&b.t, 16), 0);
    assert_int_equal(b.t.scratch_bytes, 64 + 2 * 256);
    n2 = tg_node(&b.t, BATON_OP_GET_ROWS, BATON_TYPE_F32, 32, 1, 1, 1, SRC2(lq, li), NULL);
    assert_int_equal(tg_validate(&b.t, 16), 0);
    tg_at(&b.t, n2)->op = BATON_OP_ADD; /* elementwise ops stay F32 */
    tg_at(&b.t, n2)->src[1] = b.lx;
    tg_at(&b.t, n2)->ne[1] = 2;
    assert_int_equal(tg_validate(&b.t, 16), BATON_E_TYPE);
    tg_at(&b.t, n2)->op = BATON_OP_MUL_MAT; /* quantized x: no */
    tg_at(&b.t, n2)->src[0] = lq;
    tg_at(&b.t, n2)->src[1] = lq;
    tg_at(&b.t, n2)->ne[0] = 2;
    assert_int_equal(tg_validate(&b.t, 16), BATON_E_TYPE);
}

/* K-quant weights (Q2_K..Q6_K) as MUL_MAT src0: validation reserves the
 * K activations (320 bytes per super-block per column) after the result
 * and refuses rows that are not whole super-blocks; the run gives the bits
 * of baton_cpu_mul_mat_typed (whose values test_compute_kquant.c checks
 * against an independent reference), also when two products over the same
 * x run as one group; a K table serves GET_ROWS. Skipped while the type
 * table (core/types.c) does not know the K types. */
static void test_k_weights(void **state)
{
    static const uint64_t kb[] = {84, 110, 144, 176, 210};
    uint32_t t;

    (void)state;
    if (!baton_type_get(BATON_TYPE_Q4_K))
        skip();
    for (t = BATON_TYPE_Q2_K; t <= BATON_TYPE_Q6_K; t++) {
        const uint64_t k = 512, rb = 2 * kb[t - BATON_TYPE_Q2_K];
        uint8_t w1[3 * 2 * 210], w2[2 * 2 * 210];
        float x[512 * 2], y1[6], y2[4], want1[6], want2[4], rows[512];
        int32_t ids[1] = {2};
        uint8_t work[2 * 2 * 320] __attribute__((aligned(64)));
        struct tg tg;
        uint32_t lw1, lw2, lx, ly1, ly2, li, lr, n1, n2, n3;
        uint64_t i;

        for (i = 0; i < sizeof(w1); i++)
            w1[i] = (uint8_t)(i * 37 + t);
        for (i = 0; i < sizeof(w2); i++)
            w2[i] = (uint8_t)(i * 11 + 3 * t);
        for (i = 0; i < 6; i++) { /* d and dmin of every super-block: 2^-6 */
            const uint64_t off = t == BATON_TYPE_Q2_K   ? 80
                                 : t == BATON_TYPE_Q3_K ? 108
                                 : t == BATON_TYPE_Q6_K ? 208
                                                        : 0;
            uint8_t *b = w1 + i * (rb / 2);

            b[off] = 0x00, b[off + 1] = 0x24;
            if (t != BATON_TYPE_Q3_K && t != BATON_TYPE_Q6_K)
                b[off + 2] = 0x00, b[off + 3] = 0x24;
            if (i < 4) {
                b = w2 + i * (rb / 2);
                b[off] = 0x00, b[off + 1] = 0xA4; /* -2^-6 */
                if (t != BATON_TYPE_Q3_K && t != BATON_TYPE_Q6_K)
                    b[off + 2] = 0x00, b[off + 3] = 0x24;
            }
        }
        for (i = 0; i < 1024; i++)
            x[i] = (float)((int)(i * 7919 % 257) - 128) / 64.0f;
        baton_cpu_mul_mat_typed(NULL, t, w1, x, want1, k, 3, 2, work);
        baton_cpu_mul_mat_typed(NULL, t, w2, x, want2, k, 2, 2, work);

        tg_init(&tg);
        lw1 = tg_leaf(&tg, t, k, 3, 1, 1, w1);
        lw2 = tg_leaf(&tg, t, k, 2, 1, 1, w2);
        lx = tg_leaf(&tg, BATON_TYPE_F32, k, 2, 1, 1, x);
        ly1 = tg_leaf(&tg, BATON_TYPE_F32, 3, 2, 1, 1, y1);
        ly2 = tg_leaf(&tg, BATON_TYPE_F32, 2, 2, 1, 1, y2);
        li = tg_leaf(&tg, BATON_TYPE_I32, 1, 1, 1, 1, ids);
        lr = tg_leaf(&tg, BATON_TYPE_F32, k, 1, 1, 1, rows);
        n1 = tg_node(&tg, BATON_OP_MUL_MAT, BATON_TYPE_F32, 3, 2, 1, 1, SRC2(lw1, lx), NULL);
        assert_int_equal(tg_validate(&tg, 16), 0);
        assert_int_equal(tg.scratch_bytes, 64 + 2 * 2 * 320);
        n2 = tg_node(&tg, BATON_OP_MUL_MAT, BATON_TYPE_F32, 2, 2, 1, 1, SRC2(lw2, lx), NULL);
        /* the results reach out leaves through SCALE by 1 (exact), so the
         * two products stay in scratch and run as one group */
        n3 = tg_node(&tg, BATON_OP_SCALE, BATON_TYPE_F32, 3, 2, 1, 1, SRC1(n1), NULL);
        tg_at(&tg, n3)->params[0] = 0x3F800000u; /* 1.0f */
        tg_at(&tg, n3)->out_leaf = ly1;
        n3 = tg_node(&tg, BATON_OP_SCALE, BATON_TYPE_F32, 2, 2, 1, 1, SRC1(n2), NULL);
        tg_at(&tg, n3)->params[0] = 0x3F800000u;
        tg_at(&tg, n3)->out_leaf = ly2;
        n3 = tg_node(&tg, BATON_OP_GET_ROWS, BATON_TYPE_F32, k, 1, 1, 1, SRC2(lw1, li), NULL);
        tg_at(&tg, n3)->out_leaf = lr;
        assert_int_equal(tg_run(&tg, NULL), 0);
        assert_memory_equal(y1, want1, sizeof(y1));
        assert_memory_equal(y2, want2, sizeof(y2));
        {
            float deq[512];

            assert_int_equal(baton_dequantize_row(t, w1 + 2 * rb, deq, k), 0);
            assert_memory_equal(rows, deq, sizeof(rows));
        }

        tg_init(&tg); /* a row of 300 elements is no whole super-block */
        lw1 = tg_leaf(&tg, t, 256, 3, 1, 1, w1);
        lx = tg_leaf(&tg, BATON_TYPE_F32, 300, 2, 1, 1, x);
        tg.leaves[lw1].ne[0] = 300;
        tg_node(&tg, BATON_OP_MUL_MAT, BATON_TYPE_F32, 3, 2, 1, 1, SRC2(lw1, lx), NULL);
        assert_int_equal(tg_validate(&tg, 16), BATON_E_SHAPE);
    }
}

static void test_out_leaf_rules(void **state)
{
    struct base b;
    float y3[6];
    int32_t yi[4];
    uint32_t l3, li;

    (void)state;
    base_setup(&b); /* leaves added after the node: address it as nodes[0] */
    l3 = tg_leaf(&b.t, BATON_TYPE_F32, 3, 2, 1, 1, y3);
    li = tg_leaf(&b.t, BATON_TYPE_I32, 2, 2, 1, 1, yi);
    b.t.nodes[0].out_leaf = l3; /* shape {3,2} vs {2,2} */
    assert_int_equal(tg_validate(&b.t, 16), BATON_E_SHAPE);
    b.t.nodes[0].out_leaf = li; /* type I32 vs F32 */
    assert_int_equal(tg_validate(&b.t, 16), BATON_E_TYPE);
    b.t.nodes[0].out_leaf = 99; /* not a leaf */
    assert_int_equal(tg_validate(&b.t, 16), BATON_E_GRAPH);
}

static void test_out_leaf_is_own_source(void **state)
{
    struct tg t;
    float x[4] = {0}, y[4];
    uint32_t lx, ly, r, n, s;

    (void)state;
    tg_init(&t);
    lx = tg_leaf(&t, BATON_TYPE_F32, 4, 1, 1, 1, x);
    ly = tg_leaf(&t, BATON_TYPE_F32, 4, 1, 1, 1, y);
    n = tg_node(&t, BATON_OP_SCALE, BATON_TYPE_F32, 4, 1, 1, 1, SRC1(lx), P1(f32_bits(2.0f)));
    tg_at(&t, n)->out_leaf = lx; /* directly */
    assert_int_equal(tg_validate(&t, 16), BATON_E_GRAPH);

    /* through a RESHAPE of the leaf */
    tg_init(&t);
    lx = tg_leaf(&t, BATON_TYPE_F32, 4, 1, 1, 1, x);
    ly = tg_leaf(&t, BATON_TYPE_F32, 4, 1, 1, 1, y);
    r = tg_node(&t, BATON_OP_RESHAPE, BATON_TYPE_F32, 2, 2, 1, 1, SRC1(lx), NULL);
    r = tg_node(&t, BATON_OP_RESHAPE, BATON_TYPE_F32, 4, 1, 1, 1, SRC1(r), NULL);
    n = tg_node(&t, BATON_OP_SCALE, BATON_TYPE_F32, 4, 1, 1, 1, SRC1(r), P1(f32_bits(2.0f)));
    tg_at(&t, n)->out_leaf = lx;
    assert_int_equal(tg_validate(&t, 16), BATON_E_GRAPH);
    tg_at(&t, n)->out_leaf = ly;
    assert_int_equal(tg_validate(&t, 16), 0);

    /* through another node's out leaf */
    s = tg_node(&t, BATON_OP_SILU, BATON_TYPE_F32, 4, 1, 1, 1, SRC1(n), NULL);
    tg_at(&t, s)->out_leaf = ly;
    assert_int_equal(tg_validate(&t, 16), BATON_E_GRAPH);
    tg_at(&t, s)->out_leaf = lx; /* x is not read by this node: allowed */
    assert_int_equal(tg_validate(&t, 16), 0);
}

static void test_reshape_rules(void **state)
{
    struct tg t;
    float x[6] = {0}, y[6];
    uint32_t lx, ly, r;

    (void)state;
    tg_init(&t);
    lx = tg_leaf(&t, BATON_TYPE_F32, 6, 1, 1, 1, x);
    ly = tg_leaf(&t, BATON_TYPE_F32, 3, 2, 1, 1, y);
    r = tg_node(&t, BATON_OP_RESHAPE, BATON_TYPE_F32, 3, 2, 1, 1, SRC1(lx), NULL);
    assert_int_equal(tg_validate(&t, 16), 0);
    tg_at(&t, r)->out_leaf = ly; /* a view cannot have an out leaf */
    assert_int_equal(tg_validate(&t, 16), BATON_E_GRAPH);
    tg_at(&t, r)->out_leaf = NONE;
    tg_at(&t, r)->ne[1] = 3; /* 9 elements vs 6 */
    assert_int_equal(tg_validate(&t, 16), BATON_E_SHAPE);
    tg_at(&t, r)->ne[1] = 2;
    tg_at(&t, r)->type = BATON_TYPE_I32; /* keeps the source's type */
    assert_int_equal(tg_validate(&t, 16), BATON_E_TYPE);
}

static void test_max_nodes(void **state)
{
    struct tg t;
    float x[4] = {0};
    uint32_t prev, i;

    (void)state;
    tg_init(&t);
    prev = tg_leaf(&t, BATON_TYPE_F32, 4, 1, 1, 1, x);
    for (i = 0; i < 5; i++)
        prev = tg_node(&t, BATON_OP_SILU, BATON_TYPE_F32, 4, 1, 1, 1, SRC1(prev), NULL);
    assert_int_equal(tg_validate(&t, 5), 0);
    assert_int_equal(tg_validate(&t, 4), BATON_E_LIMIT);
}

static void test_param_rules(void **state)
{
    struct tg t;
    float x[8] = {0}, e[8] = {0};
    int32_t pos[2] = {0};
    uint32_t lx, lp, n, r;

    (void)state;
    tg_init(&t);
    lx = tg_leaf(&t, BATON_TYPE_F32, 4, 1, 2, 1, x);
    lp = tg_leaf(&t, BATON_TYPE_I32, 2, 1, 1, 1, pos);
    n = tg_node(&t, BATON_OP_ROPE, BATON_TYPE_F32, 4, 1, 2, 1, SRC2(lx, lp),
                P3(4, f32_bits(10000.0f), 0));
    assert_int_equal(tg_validate(&t, 16), 0);
    tg_at(&t, n)->params[0] = 3; /* odd */
    assert_int_equal(tg_validate(&t, 16), BATON_E_INVAL);
    tg_at(&t, n)->params[0] = 6; /* > ne[0] */
    assert_int_equal(tg_validate(&t, 16), BATON_E_INVAL);
    tg_at(&t, n)->params[0] = 0;
    assert_int_equal(tg_validate(&t, 16), BATON_E_INVAL);
    tg_at(&t, n)->params[0] = 4;
    tg_at(&t, n)->params[1] = f32_bits(0.0f);
    assert_int_equal(tg_validate(&t, 16), BATON_E_INVAL);
    tg_at(&t, n)->params[1] = f32_bits(INFINITY);
    assert_int_equal(tg_validate(&t, 16), BATON_E_INVAL);
    tg_at(&t, n)->params[1] = f32_bits(10000.0f);
    tg_at(&t, n)->params[2] = 2; /* NeoX pairs */
    assert_int_equal(tg_validate(&t, 16), 0);
    tg_at(&t, n)->params[2] = 1; /* no such mode */
    assert_int_equal(tg_validate(&t, 16), BATON_E_UNSUPPORTED);
    tg_at(&t, n)->params[2] = 3;
    assert_int_equal(tg_validate(&t, 16), BATON_E_UNSUPPORTED);
    tg_at(&t, n)->params[2] = 0;
    tg_at(&t, n)->params[5] = 1; /* a parameter ROPE does not read */
    assert_int_equal(tg_validate(&t, 16), BATON_E_INVAL);
    tg_at(&t, n)->params[5] = 0;
    t.leaves[lp].ne[0] = 1; /* pos {1} vs nt 2 */
    t.leaves[lp].nb[2] = t.leaves[lp].nb[3] = t.leaves[lp].nbytes = 4;
    t.leaves[lp].nb[1] = 4;
    assert_int_equal(tg_validate(&t, 16), BATON_E_SHAPE);

    tg_init(&t);
    lx = tg_leaf(&t, BATON_TYPE_F32, 8, 1, 1, 1, e);
    r = tg_node(&t, BATON_OP_RMS_NORM, BATON_TYPE_F32, 8, 1, 1, 1, SRC1(lx), P1(f32_bits(1e-5f)));
    assert_int_equal(tg_validate(&t, 16), 0);
    tg_at(&t, r)->params[0] = f32_bits(-1e-5f);
    assert_int_equal(tg_validate(&t, 16), BATON_E_INVAL);
    tg_at(&t, r)->params[0] = f32_bits(NAN);
    assert_int_equal(tg_validate(&t, 16), BATON_E_INVAL);
    tg_at(&t, r)->op = BATON_OP_SILU;
    tg_at(&t, r)->params[0] = 1; /* SILU reads no parameter */
    assert_int_equal(tg_validate(&t, 16), BATON_E_INVAL);
}

/* ATTENTION wiring: hd 2, nh 2, nkv 1, nt 1, n_ctx 4. */
struct attn_g {
    struct tg t;
    float q[4], k[2], v[2], kc[8], vc[8];
    int32_t pos[1];
    uint32_t lq, lk, lv, lkc, lvc, lp, n;
};

static void attn_g_setup(struct attn_g *a)
{
    memset(a, 0, sizeof(*a));
    tg_init(&a->t);
    a->lq = tg_leaf(&a->t, BATON_TYPE_F32, 2, 2, 1, 1, a->q);
    a->lk = tg_leaf(&a->t, BATON_TYPE_F32, 2, 1, 1, 1, a->k);
    a->lv = tg_leaf(&a->t, BATON_TYPE_F32, 2, 1, 1, 1, a->v);
    a->lkc = tg_leaf(&a->t, BATON_TYPE_F32, 2, 4, 1, 1, a->kc); /* {hd,n_ctx,nkv} */
    a->lvc = tg_leaf(&a->t, BATON_TYPE_F32, 2, 4, 1, 1, a->vc);
    a->lp = tg_leaf(&a->t, BATON_TYPE_I32, 1, 1, 1, 1, a->pos);
    a->n = tg_node(&a->t, BATON_OP_ATTENTION, BATON_TYPE_F32, 2, 2, 1, 1,
                   SRC6(a->lq, a->lk, a->lv, a->lkc, a->lvc, a->lp), P1(f32_bits(0.5f)));
}

static void test_attention_rules(void **state)
{
    struct attn_g a;
    uint32_t c;

    (void)state;
    attn_g_setup(&a);
    assert_int_equal(tg_validate(&a.t, 16), 0);
    /* result (16 bytes, block rounded to 64) + one score row of n_ctx = 4
     * floats per (token, head) pair: 64 + 2 * 16 = 96, arena rounded to 128 */
    assert_int_equal(a.t.scratch_bytes, 128);

    tg_at(&a.t, a.n)->src[4] = a.lkc; /* both caches the same leaf */
    assert_int_equal(tg_validate(&a.t, 16), BATON_E_GRAPH);

    /* The k cache also read as v (nkv = nt = n_ctx = 2 makes the shapes
     * {hd,nkv,nt} and {hd,n_ctx,nkv} agree). */
    {
        struct tg t;
        float q[8] = {0}, kv[8] = {0}, kc[8] = {0}, vc[8] = {0};
        int32_t pos[2] = {0, 1};
        uint32_t lq, lk, lkc, lvc, lp, n;

        tg_init(&t);
        lq = tg_leaf(&t, BATON_TYPE_F32, 2, 2, 2, 1, q);
        lk = tg_leaf(&t, BATON_TYPE_F32, 2, 2, 2, 1, kv);
        lkc = tg_leaf(&t, BATON_TYPE_F32, 2, 2, 2, 1, kc);
        lvc = tg_leaf(&t, BATON_TYPE_F32, 2, 2, 2, 1, vc);
        lp = tg_leaf(&t, BATON_TYPE_I32, 2, 1, 1, 1, pos);
        n = tg_node(&t, BATON_OP_ATTENTION, BATON_TYPE_F32, 2, 2, 2, 1,
                    SRC6(lq, lk, lk, lkc, lvc, lp), P1(f32_bits(1.0f)));
        assert_int_equal(tg_validate(&t, 16), 0);
        tg_at(&t, n)->src[2] = lkc;
        assert_int_equal(tg_validate(&t, 16), BATON_E_GRAPH);
    }

    attn_g_setup(&a);
    a.t.g.n_nodes = 0;
    c = tg_node(&a.t, BATON_OP_SCALE, BATON_TYPE_F32, 2, 4, 1, 1, SRC1(a.lkc), P1(f32_bits(1.0f)));
    tg_node(&a.t, BATON_OP_ATTENTION, BATON_TYPE_F32, 2, 2, 1, 1,
            SRC6(a.lq, a.lk, a.lv, c, a.lvc, a.lp), P1(f32_bits(0.5f)));
    assert_int_equal(tg_validate(&a.t, 16), BATON_E_GRAPH); /* a cache that is a node */

    attn_g_setup(&a);
    tg_at(&a.t, a.n)->params[1] = 2; /* unknown score mode */
    assert_int_equal(tg_validate(&a.t, 16), BATON_E_UNSUPPORTED);

    /* nh 3 with nkv 2 (3 % 2 != 0); shapes otherwise consistent */
    {
        struct tg t;
        float q[6], k[4], kc[8];
        int32_t pos[1];
        uint32_t lq, lk, lv, lkc, lvc, lp;

        tg_init(&t);
        lq = tg_leaf(&t, BATON_TYPE_F32, 2, 3, 1, 1, q);
        lk = tg_leaf(&t, BATON_TYPE_F32, 2, 2, 1, 1, k);
        lv = tg_leaf(&t, BATON_TYPE_F32, 2, 2, 1, 1, k);
        lkc = tg_leaf(&t, BATON_TYPE_F32, 2, 2, 2, 1, kc);
        lvc = tg_leaf(&t, BATON_TYPE_F32, 2, 2, 2, 1, kc);
        lp = tg_leaf(&t, BATON_TYPE_I32, 1, 1, 1, 1, pos);
        tg_node(&t, BATON_OP_ATTENTION, BATON_TYPE_F32, 2, 3, 1, 1,
                SRC6(lq, lk, lv, lkc, lvc, lp), P1(f32_bits(1.0f)));
        assert_int_equal(tg_validate(&t, 16), BATON_E_SHAPE);
    }
}

static void test_leaf_descriptor_rechecked(void **state)
{
    struct base b;

    (void)state;
    base_setup(&b);
    b.t.leaves[b.lw].nbytes = 20; /* not the extent of {3,2} f32 */
    assert_int_equal(tg_validate(&b.t, 16), BATON_E_SHAPE);
    base_setup(&b);
    b.t.leaves[b.lw].nb[1] = 16; /* not contiguous */
    assert_int_equal(tg_validate(&b.t, 16), BATON_E_SHAPE);
    base_setup(&b);
    b.t.leaves[b.lw].type = 4; /* retired Q4_2 */
    assert_int_equal(tg_validate(&b.t, 16), BATON_E_TYPE);
}

static void test_size_overflow(void **state)
{
    /* GET_ROWS of a {2^40, 1} table by 2^40 ids declares a {2^40, 2^40}
     * result: 2^82 bytes. */
    struct tg t;
    uint32_t lt, li;
    const uint64_t big = 1ull << 40;

    (void)state;
    tg_init(&t);
    lt = tg_leaf(&t, BATON_TYPE_F32, big, 1, 1, 1, NULL);
    li = tg_leaf(&t, BATON_TYPE_I32, big, 1, 1, 1, NULL);
    tg_node(&t, BATON_OP_GET_ROWS, BATON_TYPE_F32, big, big, 1, 1, SRC2(lt, li), NULL);
    assert_int_equal(tg_validate(&t, 16), BATON_E_OVERFLOW);
    /* a declared dimension past the per-dimension limit */
    t.nodes[0].ne[2] = (1ull << 40) + 1;
    assert_int_equal(tg_validate(&t, 16), BATON_E_LIMIT);
}

/* ---- execution through the arena ---- */

static void test_chain_through_scratch(void **state)
{
    /* x {1,2,3,4} -> RMS_NORM (eps 0) -> MUL by w {2,2,2,2} -> MUL_MAT with
     * W rows [1 1 1 1], [1 -1 0 0] -> SILU -> out leaf.
     * y = 2x/sqrt(7.5) = (0.73029674, 1.46059349, 2.19089023, 2.92118697)
     * h = (sum y, y0 - y1) = (7.30296743, -0.73029674)
     * silu(h) = h / (1 + e^-h) = (7.29805192, -0.23744110) */
    float x[4] = {1, 2, 3, 4}, w[4] = {2, 2, 2, 2}, W[8] = {1, 1, 1, 1, 1, -1, 0, 0}, out[2];
    struct tg t;
    uint32_t lx, lw, lW, lo, n0, n1, n2, n3;

    (void)state;
    tg_init(&t);
    lx = tg_leaf(&t, BATON_TYPE_F32, 4, 1, 1, 1, x);
    lw = tg_leaf(&t, BATON_TYPE_F32, 4, 1, 1, 1, w);
    lW = tg_leaf(&t, BATON_TYPE_F32, 4, 2, 1, 1, W);
    lo = tg_leaf(&t, BATON_TYPE_F32, 2, 1, 1, 1, out);
    n0 = tg_node(&t, BATON_OP_RMS_NORM, BATON_TYPE_F32, 4, 1, 1, 1, SRC1(lx), P1(0));
    n1 = tg_node(&t, BATON_OP_MUL, BATON_TYPE_F32, 4, 1, 1, 1, SRC2(n0, lw), NULL);
    n2 = tg_node(&t, BATON_OP_MUL_MAT, BATON_TYPE_F32, 2, 1, 1, 1, SRC2(lW, n1), NULL);
    n3 = tg_node(&t, BATON_OP_SILU, BATON_TYPE_F32, 2, 1, 1, 1, SRC1(n2), NULL);
    tg_at(&t, n3)->out_leaf = lo;
    assert_int_equal(tg_run(&t, NULL), 0);
    assert_true(fabsf(out[0] - 7.29805192f) <= 1e-5f);
    assert_true(fabsf(out[1] - -0.23744110f) <= 1e-6f);
    /* n0 and n1 are live together, then n2 reuses n0's block */
    assert_int_equal(t.plan[0].scratch_offset, 0);
    assert_int_equal(t.plan[1].scratch_offset, 64);
    assert_int_equal(t.plan[2].scratch_offset, 0);
    assert_int_equal(t.scratch_bytes, 128);
    /* flops: 4 + 4 + 2*4*2 + 2 */
    assert_int_equal(baton_graph_flops(&t.g), 4 + 4 + 16 + 2);
}

static void test_scratch_reuse_and_long_lived_values(void **state)
{
    /* s0 = 2x, s1 = 2 s0, s2 = 2 s1, s3 = s0 + s2 = 2x + 8x = 10x, then
     * s4..s6 double again: out = 80x. Every value is 16 floats (64 bytes).
     * s0 stays live until s3 although s1 and s2 come between. */
    float x[16], out[16];
    struct tg t;
    uint32_t lx, lo, s0, s1, s2, s3, s, i;

    (void)state;
    for (i = 0; i < 16; i++)
        x[i] = (float)i - 3.0f;
    tg_init(&t);
    lx = tg_leaf(&t, BATON_TYPE_F32, 16, 1, 1, 1, x);
    lo = tg_leaf(&t, BATON_TYPE_F32, 16, 1, 1, 1, out);
    s0 = tg_node(&t, BATON_OP_SCALE, BATON_TYPE_F32, 16, 1, 1, 1, SRC1(lx), P1(f32_bits(2.0f)));
    s1 = tg_node(&t, BATON_OP_SCALE, BATON_TYPE_F32, 16, 1, 1, 1, SRC1(s0), P1(f32_bits(2.0f)));
    s2 = tg_node(&t, BATON_OP_SCALE, BATON_TYPE_F32, 16, 1, 1, 1, SRC1(s1), P1(f32_bits(2.0f)));
    s3 = tg_node(&t, BATON_OP_ADD, BATON_TYPE_F32, 16, 1, 1, 1, SRC2(s0, s2), NULL);
    s = s3;
    for (i = 0; i < 3; i++)
        s = tg_node(&t, BATON_OP_SCALE, BATON_TYPE_F32, 16, 1, 1, 1, SRC1(s), P1(f32_bits(2.0f)));
    tg_at(&t, s)->out_leaf = lo;
    assert_int_equal(tg_run(&t, NULL), 0);
    for (i = 0; i < 16; i++)
        assert_true(out[i] == 80.0f * x[i]);
    /* s0 at 0 (until s3), s1 at 64, s2 at 128 (s1 still live while s2 runs),
     * s3 at 64 (s1 freed), s4 at 0, s5 at 64: peak 192, not 6*64. */
    assert_int_equal(t.plan[0].scratch_offset, 0);
    assert_int_equal(t.plan[1].scratch_offset, 64);
    assert_int_equal(t.plan[2].scratch_offset, 128);
    assert_int_equal(t.plan[3].scratch_offset, 64);
    assert_int_equal(t.scratch_bytes, 192);
}

static void test_out_leaf_result_read_later(void **state)
{
    /* n0 = x * 3 written to leaf y; n1 = n0 + x reads it back from y. */
    float x[4] = {1, 2, 3, 4}, y[4], z[4];
    struct tg t;
    uint32_t lx, ly, lz, n0, n1;

    (void)state;
    tg_init(&t);
    lx = tg_leaf(&t, BATON_TYPE_F32, 4, 1, 1, 1, x);
    ly = tg_leaf(&t, BATON_TYPE_F32, 4, 1, 1, 1, y);
    lz = tg_leaf(&t, BATON_TYPE_F32, 4, 1, 1, 1, z);
    n0 = tg_node(&t, BATON_OP_SCALE, BATON_TYPE_F32, 4, 1, 1, 1, SRC1(lx), P1(f32_bits(3.0f)));
    tg_at(&t, n0)->out_leaf = ly;
    n1 = tg_node(&t, BATON_OP_ADD, BATON_TYPE_F32, 4, 1, 1, 1, SRC2(n0, lx), NULL);
    tg_at(&t, n1)->out_leaf = lz;
    assert_int_equal(tg_run(&t, NULL), 0);
    assert_memory_equal(y, ((const float[4]){3, 6, 9, 12}), sizeof(y));
    assert_memory_equal(z, ((const float[4]){4, 8, 12, 16}), sizeof(z));
    assert_int_equal(t.scratch_bytes, 0);
}

static void test_misaligned_leaf_refused(void **state)
{
    _Alignas(16) uint8_t raw[64] = {0};
    float y[4];
    struct tg t;
    uint32_t lx, ly, n;

    (void)state;
    tg_init(&t);
    lx = tg_leaf(&t, BATON_TYPE_F32, 4, 1, 1, 1, raw + 2);
    ly = tg_leaf(&t, BATON_TYPE_F32, 4, 1, 1, 1, y);
    n = tg_node(&t, BATON_OP_SCALE, BATON_TYPE_F32, 4, 1, 1, 1, SRC1(lx), P1(f32_bits(1.0f)));
    tg_at(&t, n)->out_leaf = ly;
    assert_int_equal(tg_run(&t, NULL), BATON_E_INVAL);
    t.data[lx] = raw + 4;
    assert_int_equal(tg_run(&t, NULL), 0);
}

/* ---- determinism ---- */

static uint32_t lcg_state;

static float lcg_float(void)
{
    lcg_state = lcg_state * 1664525u + 1013904223u;
    return (float)(int32_t)(lcg_state >> 8) / (float)(1 << 23) - 0.5f; /* values in [-0.5, 1.5) */
}

static void run_mul_mat(const float *W, const float *x, float *y, uint64_t m,
                        struct baton_pool *pool)
{
    struct tg t;
    uint32_t lW, lx, ly, n;

    tg_init(&t);
    lW = tg_leaf(&t, BATON_TYPE_F32, 64, 200, 1, 1, (void *)W);
    lx = tg_leaf(&t, BATON_TYPE_F32, 64, m, 1, 1, (void *)x);
    ly = tg_leaf(&t, BATON_TYPE_F32, 200, m, 1, 1, y);
    n = tg_node(&t, BATON_OP_MUL_MAT, BATON_TYPE_F32, 200, m, 1, 1, SRC2(lW, lx), NULL);
    tg_at(&t, n)->out_leaf = ly;
    assert_int_equal(tg_run(&t, pool), 0);
}

static void test_mul_mat_deterministic(void **state)
{
    static float W[64 * 200], x[64 * 7], y1[200 * 7], y2[200 * 7], y3[200 * 7], ref[200 * 7],
        one[200];
    struct baton_pool *p1, *p2, *p3;
    uint32_t i, m, k;

    (void)state;
    lcg_state = 12345;
    for (i = 0; i < 64 * 200; i++)
        W[i] = lcg_float();
    for (i = 0; i < 64 * 7; i++)
        x[i] = lcg_float();
    /* Reference: one float accumulator per output, k ascending. */
    for (m = 0; m < 7; m++)
        for (i = 0; i < 200; i++) {
            float s = 0.0f;

            for (k = 0; k < 64; k++)
                s += W[i * 64 + k] * x[m * 64 + k];
            ref[m * 200 + i] = s;
        }
    assert_int_equal(baton_pool_create(1, &p1), 0);
    assert_int_equal(baton_pool_create(2, &p2), 0);
    assert_int_equal(baton_pool_create(3, &p3), 0);
    run_mul_mat(W, x, y1, 7, p1);
    run_mul_mat(W, x, y2, 7, p2);
    run_mul_mat(W, x, y3, 7, p3);
    assert_memory_equal(y1, ref, sizeof(ref));
    assert_memory_equal(y2, ref, sizeof(ref));
    assert_memory_equal(y3, ref, sizeof(ref));
    /* Column m of the 7-token batch equals the 1-token result, bit for bit. */
    for (m = 0; m < 7; m++) {
        run_mul_mat(W, x + m * 64, one, 1, p2);
        assert_memory_equal(one, y2 + m * 200, sizeof(one));
    }
    baton_pool_destroy(p1);
    baton_pool_destroy(p2);
    baton_pool_destroy(p3);
}

/* Consecutive MUL_MATs over one x run as one group (graph.c,
 * baton_cpu_mul_mat_group). Three products of 40, 24 and 17 rows (ragged
 * against the 16-row units) over one x, each copied out by SCALE 1.0,
 * against the same products each written straight to an out leaf (which
 * never groups), for every weight type, 1 and 5 columns, 1 to 3 threads:
 * the bits must be equal. */
#define GK 64
static void run_group(uint32_t type, void *const w[3], const uint64_t rows[3], const float *x,
                      uint64_t m, int grouped, float *const y[3], struct baton_pool *pool)
{
    struct tg t;
    uint32_t lw[3], lx, ly[3], n[3], i;

    tg_init(&t);
    lx = tg_leaf(&t, BATON_TYPE_F32, GK, m, 1, 1, (void *)x);
    for (i = 0; i < 3; i++) {
        lw[i] = tg_leaf(&t, type, GK, rows[i], 1, 1, w[i]);
        ly[i] = tg_leaf(&t, BATON_TYPE_F32, rows[i], m, 1, 1, y[i]);
    }
    for (i = 0; i < 3; i++) {
        n[i] = tg_node(&t, BATON_OP_MUL_MAT, BATON_TYPE_F32, rows[i], m, 1, 1, SRC2(lw[i], lx),
                       NULL);
        if (!grouped)
            tg_at(&t, n[i])->out_leaf = ly[i];
    }
    if (grouped)
        for (i = 0; i < 3; i++)
            tg_at(&t, tg_node(&t, BATON_OP_SCALE, BATON_TYPE_F32, rows[i], m, 1, 1, SRC1(n[i]),
                              P1(f32_bits(1.0f))))
                ->out_leaf = ly[i];
    assert_int_equal(tg_run(&t, pool), 0);
}

static void test_mul_mat_group_same_bits(void **state)
{
    static const uint32_t types[] = {BATON_TYPE_F32, BATON_TYPE_F16, BATON_TYPE_Q8_0,
                                     BATON_TYPE_Q4_0};
    static const uint64_t rows[3] = {40, 24, 17};
    static uint8_t wdata[3][40 * GK * 4];
    static float x[GK * 5], ya[3][40 * 5], yb[3][40 * 5], row[GK];
    struct baton_pool *pools[3];
    uint32_t ti, i, r, th;
    uint64_t m;

    (void)state;
    for (th = 0; th < 3; th++)
        assert_int_equal(baton_pool_create(th + 1, &pools[th]), 0);
    lcg_state = 777;
    for (i = 0; i < GK * 5; i++)
        x[i] = lcg_float();
    for (ti = 0; ti < sizeof(types) / sizeof(types[0]); ti++) {
        const uint64_t rb = baton_row_bytes(types[ti], GK);
        void *w[3] = {wdata[0], wdata[1], wdata[2]};
        float *pa[3] = {ya[0], ya[1], ya[2]}, *pb[3] = {yb[0], yb[1], yb[2]};

        for (i = 0; i < 3; i++)
            for (r = 0; r < rows[i]; r++) {
                uint32_t e;

                for (e = 0; e < GK; e++)
                    row[e] = lcg_float();
                assert_int_equal(baton_quantize_row(types[ti], row, wdata[i] + r * rb, GK), 0);
            }
        for (m = 1; m <= 5; m += 4)
            for (th = 0; th < 3; th++) {
                memset(ya, 0x5A, sizeof(ya));
                memset(yb, 0x3C, sizeof(yb));
                run_group(types[ti], w, rows, x, m, 1, pa, pools[th]);
                run_group(types[ti], w, rows, x, m, 0, pb, pools[th]);
                for (i = 0; i < 3; i++)
                    assert_memory_equal(ya[i], yb[i], rows[i] * m * sizeof(float));
            }
    }
    for (th = 0; th < 3; th++)
        baton_pool_destroy(pools[th]);
}

/* Turns (baton_graph_execute_turns): a group above BATON_GRAPH_TURN_FLOPS
 * per pool thread (K 1024, 4100 + 48 rows, 512 columns: 4.35 GFLOP; 2
 * threads: 2 GFLOP) runs in pieces of its rows laid end to end, a multiple
 * of 32 rows each (2 x 1888 + 372 here; the last piece spans both
 * products), with the callback between nodes and pieces;
 * every result bit equals the run without turns (one group call), for F32,
 * Q8_0, Q4_0 and Q4_K weights, 2 threads. */
#define TURN_K 1024u
static int turns_count, turns_stop_at;
static int count_turn(void *arg)
{
    (void)arg;
    turns_count++;
    return turns_stop_at > 0 && turns_count >= turns_stop_at;
}

static void run_turns_graph(uint32_t type, const void *wbig, const void *wsmall, const float *x,
                            float *ybig, float *ysmall, const struct baton_exec_turns *turns,
                            struct baton_pool *pool)
{
    struct tg t;
    uint32_t lb, ls, lx, lyb, lys, nb, ns;

    tg_init(&t);
    lx = tg_leaf(&t, BATON_TYPE_F32, TURN_K, 512, 1, 1, (void *)x);
    lb = tg_leaf(&t, type, TURN_K, 4100, 1, 1, (void *)wbig);
    ls = tg_leaf(&t, type, TURN_K, 48, 1, 1, (void *)wsmall);
    lyb = tg_leaf(&t, BATON_TYPE_F32, 4100, 512, 1, 1, ybig);
    lys = tg_leaf(&t, BATON_TYPE_F32, 48, 512, 1, 1, ysmall);
    nb = tg_node(&t, BATON_OP_MUL_MAT, BATON_TYPE_F32, 4100, 512, 1, 1, SRC2(lb, lx), NULL);
    ns = tg_node(&t, BATON_OP_MUL_MAT, BATON_TYPE_F32, 48, 512, 1, 1, SRC2(ls, lx), NULL);
    tg_at(&t, tg_node(&t, BATON_OP_SCALE, BATON_TYPE_F32, 4100, 512, 1, 1, SRC1(nb),
                      P1(f32_bits(1.0f))))
        ->out_leaf = lyb;
    tg_at(&t, tg_node(&t, BATON_OP_SCALE, BATON_TYPE_F32, 48, 512, 1, 1, SRC1(ns),
                      P1(f32_bits(1.0f))))
        ->out_leaf = lys;
    assert_int_equal(tg_run_turns(&t, pool, turns), 0);
}

static void test_turns_same_bits(void **state)
{
    static const uint32_t types[] = {BATON_TYPE_F32, BATON_TYPE_Q8_0, BATON_TYPE_Q4_0,
                                     BATON_TYPE_Q4_K};
    const struct baton_exec_turns turns = {count_turn, NULL};
    struct baton_pool *pool;
    float row[TURN_K];

    (void)state;
    float *x = malloc(TURN_K * 512 * sizeof(float));
    uint8_t *wb = malloc(4100 * TURN_K * 4), *ws = malloc(48 * TURN_K * 4);
    float *y1 = malloc(4100 * 512 * sizeof(float)), *y2 = malloc(4100 * 512 * sizeof(float));
    float *s1 = malloc(48 * 512 * sizeof(float)), *s2 = malloc(48 * 512 * sizeof(float));
    assert_non_null(x);
    assert_non_null(wb);
    assert_non_null(ws);
    assert_non_null(y1);
    assert_non_null(y2);
    assert_non_null(s1);
    assert_non_null(s2);
    assert_int_equal(baton_pool_create(2, &pool), 0);
    lcg_state = 4242;
    for (uint32_t i = 0; i < TURN_K * 512; i++)
        x[i] = lcg_float();
    for (uint32_t ti = 0; ti < sizeof(types) / sizeof(types[0]); ti++) {
        const uint64_t rb = baton_row_bytes(types[ti], TURN_K);
        for (uint32_t r = 0; r < 4100 + 48; r++) {
            for (uint32_t e = 0; e < TURN_K; e++)
                row[e] = lcg_float();
            uint8_t *dst = r < 4100 ? wb + r * rb : ws + (r - 4100) * rb;
            assert_int_equal(baton_quantize_row(types[ti], row, dst, TURN_K), 0);
        }
        memset(y1, 0x5A, 4100 * 512 * sizeof(float));
        memset(y2, 0x3C, 4100 * 512 * sizeof(float));
        memset(s1, 0x5A, 48 * 512 * sizeof(float));
        memset(s2, 0x3C, 48 * 512 * sizeof(float));
        run_turns_graph(types[ti], wb, ws, x, y1, s1, NULL, pool);
        turns_count = 0;
        run_turns_graph(types[ti], wb, ws, x, y2, s2, &turns, pool);
        assert_memory_equal(y1, y2, 4100 * 512 * sizeof(float));
        assert_memory_equal(s1, s2, 48 * 512 * sizeof(float));
        /* 3 steps (the group, two SCALEs): 2 turns between them; the
         * group's 4148 rows in 3 pieces (the last: 324 rows of the big
         * product and the 48 of the small one): 2 more */
        assert_int_equal(turns_count, 4);
        /* a nonzero answer stops there: E_IO, nothing of the rest runs */
        struct tg t;
        turns_count = 0;
        turns_stop_at = 2;
        memset(s2, 0x3C, 48 * 512 * sizeof(float));
        tg_init(&t);
        {
            uint32_t lx = tg_leaf(&t, BATON_TYPE_F32, TURN_K, 512, 1, 1, x);
            uint32_t lb = tg_leaf(&t, types[ti], TURN_K, 4100, 1, 1, wb);
            uint32_t lys = tg_leaf(&t, BATON_TYPE_F32, 48, 512, 1, 1, s2);
            uint32_t ls = tg_leaf(&t, types[ti], TURN_K, 48, 1, 1, ws);
            uint32_t nb = tg_node(&t, BATON_OP_MUL_MAT, BATON_TYPE_F32, 4100, 512, 1, 1,
                                  SRC2(lb, lx), NULL);
            (void)nb;
            tg_at(&t, tg_node(&t, BATON_OP_MUL_MAT, BATON_TYPE_F32, 48, 512, 1, 1, SRC2(ls, lx),
                              NULL))
                ->out_leaf = lys;
        }
        assert_int_equal(tg_run_turns(&t, pool, &turns), BATON_E_IO);
        assert_int_equal(turns_count, 2);
        for (uint32_t k = 0; k < 48 * 512; k++)
            assert_int_equal(((uint32_t *)s2)[k], 0x3C3C3C3Cu); /* the small product never ran */
        turns_stop_at = 0;
    }
    baton_pool_destroy(pool);
    free(x);
    free(wb);
    free(ws);
    free(y1);
    free(y2);
    free(s1);
    free(s2);
}

/* A product whose weight is the previous product's result, over the same
 * x, must not join its group (it would read rows still being written):
 * y0 = W x, y1 = y0 x against plain loops, 3 threads. Large enough that,
 * were they grouped, a worker would start on y1 long before y0 is done (the
 * arena's unwritten bytes are a pattern). */
static void test_mul_mat_group_dependent_not_grouped(void **state)
{
    enum { K = 256 };
    static float W[K * K], x[K * K], y1[K * K], r0[K * K], r1[K * K];
    struct baton_pool *p;
    struct tg t;
    uint32_t lW, lx, ly, n0, n1, i, j, k;

    (void)state;
    lcg_state = 4242;
    for (i = 0; i < K * K; i++) {
        W[i] = lcg_float();
        x[i] = lcg_float();
    }
    for (i = 0; i < K; i++) /* column i of x */
        for (j = 0; j < K; j++) {
            float s = 0.0f;

            for (k = 0; k < K; k++)
                s += W[j * K + k] * x[i * K + k];
            r0[i * K + j] = s;
        }
    for (i = 0; i < K; i++)
        for (j = 0; j < K; j++) {
            float s = 0.0f;

            for (k = 0; k < K; k++)
                s += r0[j * K + k] * x[i * K + k];
            r1[i * K + j] = s;
        }
    tg_init(&t);
    lW = tg_leaf(&t, BATON_TYPE_F32, K, K, 1, 1, W);
    lx = tg_leaf(&t, BATON_TYPE_F32, K, K, 1, 1, x);
    ly = tg_leaf(&t, BATON_TYPE_F32, K, K, 1, 1, y1);
    n0 = tg_node(&t, BATON_OP_MUL_MAT, BATON_TYPE_F32, K, K, 1, 1, SRC2(lW, lx), NULL);
    n1 = tg_node(&t, BATON_OP_MUL_MAT, BATON_TYPE_F32, K, K, 1, 1, SRC2(n0, lx), NULL);
    tg_at(&t, tg_node(&t, BATON_OP_SCALE, BATON_TYPE_F32, K, K, 1, 1, SRC1(n1),
                      P1(f32_bits(1.0f))))
        ->out_leaf = ly;
    assert_int_equal(baton_pool_create(3, &p), 0);
    assert_int_equal(tg_run(&t, p), 0);
    assert_memory_equal(y1, r1, sizeof(r1));
    baton_pool_destroy(p);
}

/* A batch of nt tokens (positions 0..nt-1) against nt 1-token steps, for
 * ATTENTION preceded by ROPE on q and k and followed by RMS_NORM: outputs
 * and caches must be bit-identical, with 1 and with 3 threads. The large
 * case is big enough that ROPE and ATTENTION split across threads. */
struct adims {
    uint32_t hd, nh, nkv, n_ctx;
};

/* ROPE on q and k, ATTENTION, RMS_NORM into out; the positions pos are
 * {nt} (rows 1) or ATTENTION's {nt,3} (rows 3: ROPE reads row 0). Returns
 * tg_run's status. */
static int attn_graph(const struct adims *d, const float *q, const float *k, const float *v,
                      float *kc, float *vc, const int32_t *pos, uint32_t rows, uint32_t nt,
                      float *out, struct baton_pool *pool)
{
    struct tg t;
    uint32_t lq, lk, lv, lkc, lvc, lp, lap, lo, rq, rk, a, r;

    tg_init(&t);
    lq = tg_leaf(&t, BATON_TYPE_F32, d->hd, d->nh, nt, 1, (void *)q);
    lk = tg_leaf(&t, BATON_TYPE_F32, d->hd, d->nkv, nt, 1, (void *)k);
    lv = tg_leaf(&t, BATON_TYPE_F32, d->hd, d->nkv, nt, 1, (void *)v);
    lkc = tg_leaf(&t, BATON_TYPE_F32, d->hd, d->n_ctx, d->nkv, 1, kc);
    lvc = tg_leaf(&t, BATON_TYPE_F32, d->hd, d->n_ctx, d->nkv, 1, vc);
    lp = tg_leaf(&t, BATON_TYPE_I32, nt, 1, 1, 1, (void *)pos);
    lap = rows == 1 ? lp : tg_leaf(&t, BATON_TYPE_I32, nt, rows, 1, 1, (void *)pos);
    lo = tg_leaf(&t, BATON_TYPE_F32, d->hd * d->nh, nt, 1, 1, out);
    rq = tg_node(&t, BATON_OP_ROPE, BATON_TYPE_F32, d->hd, d->nh, nt, 1, SRC2(lq, lp),
                 P3(d->hd, f32_bits(10000.0f), 0));
    rk = tg_node(&t, BATON_OP_ROPE, BATON_TYPE_F32, d->hd, d->nkv, nt, 1, SRC2(lk, lp),
                 P3(d->hd, f32_bits(10000.0f), 0));
    a = tg_node(&t, BATON_OP_ATTENTION, BATON_TYPE_F32, d->hd, d->nh, nt, 1,
                SRC6(rq, rk, lv, lkc, lvc, lap), P1(f32_bits(1.0f / sqrtf((float)d->hd))));
    r = tg_node(&t, BATON_OP_RESHAPE, BATON_TYPE_F32, d->hd * d->nh, nt, 1, 1, SRC1(a), NULL);
    r = tg_node(&t, BATON_OP_RMS_NORM, BATON_TYPE_F32, d->hd * d->nh, nt, 1, 1, SRC1(r),
                P1(f32_bits(1e-5f)));
    tg_at(&t, r)->out_leaf = lo;
    return tg_run(&t, pool);
}

static void attn_step(const struct adims *d, const float *q, const float *k, const float *v,
                      float *kc, float *vc, const int32_t *pos, uint32_t nt, float *out,
                      struct baton_pool *pool)
{
    assert_int_equal(attn_graph(d, q, k, v, kc, vc, pos, 1, nt, out, pool), 0);
}

static void batch_equals_steps(const struct adims *d, uint32_t nt)
{
    const size_t nq = (size_t)nt * d->nh * d->hd, nk = (size_t)nt * d->nkv * d->hd;
    const size_t nc = (size_t)d->n_ctx * d->nkv * d->hd, row = (size_t)d->nh * d->hd;
    float *q = malloc(nq * 4), *k = malloc(nk * 4), *v = malloc(nk * 4);
    float *kc_b = calloc(nc, 4), *vc_b = calloc(nc, 4), *kc_s = calloc(nc, 4),
          *vc_s = calloc(nc, 4), *out_b = malloc(nq * 4), *out_s = malloc(nq * 4);
    int32_t *pos = malloc(nt * sizeof(int32_t));
    struct baton_pool *pools[2];
    uint32_t i, p, t;

    assert_non_null(q && k && v && kc_b && vc_b && kc_s && vc_s && out_b && out_s && pos);
    lcg_state = 777 + nt;
    for (i = 0; i < nq; i++)
        q[i] = lcg_float();
    for (i = 0; i < nk; i++) {
        k[i] = lcg_float();
        v[i] = lcg_float();
    }
    for (t = 0; t < nt; t++)
        pos[t] = (int32_t)t;
    assert_int_equal(baton_pool_create(1, &pools[0]), 0);
    assert_int_equal(baton_pool_create(3, &pools[1]), 0);
    for (p = 0; p < 2; p++) {
        memset(kc_b, 0, nc * 4);
        memset(vc_b, 0, nc * 4);
        memset(kc_s, 0, nc * 4);
        memset(vc_s, 0, nc * 4);
        attn_step(d, q, k, v, kc_b, vc_b, pos, nt, out_b, pools[p]);
        for (t = 0; t < nt; t++)
            attn_step(d, q + t * row, k + (size_t)t * d->nkv * d->hd,
                      v + (size_t)t * d->nkv * d->hd, kc_s, vc_s, pos + t, 1, out_s + t * row,
                      pools[1 - p]);
        assert_memory_equal(out_b, out_s, nq * 4);
        assert_memory_equal(kc_b, kc_s, nc * 4);
        assert_memory_equal(vc_b, vc_s, nc * 4);
    }
    baton_pool_destroy(pools[0]);
    baton_pool_destroy(pools[1]);
    free(q);
    free(k);
    free(v);
    free(kc_b);
    free(vc_b);
    free(kc_s);
    free(vc_s);
    free(out_b);
    free(out_s);
    free(pos);
}

/* The score rows ATTENTION gets are min(nh * nt, 64) rows of n_ctx floats
 * (graph.c sizes the scratch so; a larger area counts against the server's
 * scratch limit and the session quota), whatever the thread count: the
 * kernel scores fewer tokens at once when the pool has more threads than
 * rows / 4 (kernels.h). Called directly with a work area of exactly that
 * size and guard values after it, with pools of 1 to 40 threads: the
 * guards hold and every pool gives the 1-thread bits. */
static void test_attention_work_rows(void **state)
{
    /* nh * nt > 64: with more than 16 threads, 4-token blocks would need
     * more rows than there are; every chunk has work from the start (the
     * static shares of pool.h), so a chunk past the rows would write the
     * guards in every run */
    enum { HD = 64, NH = 16, NKV = 4, NT = 20, NCTX = 600, GUARD = 64 };
    static const uint32_t pools[] = {1, 2, 3, 8, 17, 24, 40};
    const uint64_t rows = NH * NT < 64 ? NH * NT : 64;
    static float q[HD * NH * NT], k[HD * NKV * NT], v[HD * NKV * NT];
    static float kc[HD * NCTX * NKV], vc[HD * NCTX * NKV], out[HD * NH * NT],
        want[HD * NH * NT];
    int32_t pos[NT];
    float *work = malloc(sizeof(float) * (rows * NCTX + GUARD));
    uint32_t p, i;

    (void)state;
    assert_non_null(work);
    lcg_state = 4242;
    for (i = 0; i < HD * NH * NT; i++)
        q[i] = lcg_float();
    for (i = 0; i < HD * NKV * NT; i++) {
        k[i] = lcg_float();
        v[i] = lcg_float();
    }
    for (i = 0; i < HD * NCTX * NKV; i++) {
        kc[i] = lcg_float();
        vc[i] = lcg_float();
    }
    for (i = 0; i < NT; i++)
        pos[i] = (int32_t)(NCTX - NT + i); /* long rows: enough work for 8 chunks */
    for (p = 0; p < sizeof(pools) / sizeof(pools[0]); p++) {
        const uint32_t th = pools[p];
        struct baton_pool *pool;
        struct baton_cpu_attention a = {q,  k,  v,   kc,  vc, pos, NULL, out, work, HD, NH,
                                        NKV, NT, NCTX, 0.125f, 0, 0, 0};

        for (i = 0; i < GUARD; i++)
            work[rows * NCTX + i] = -7.0f;
        assert_int_equal(baton_pool_create(th, &pool), 0);
        assert_int_equal(baton_cpu_attention(pool, &a), 0);
        baton_pool_destroy(pool);
        for (i = 0; i < GUARD; i++)
            assert_true(work[rows * NCTX + i] == -7.0f);
        if (th == 1)
            memcpy(want, out, sizeof(out));
        else
            assert_memory_equal(out, want, sizeof(out));
    }
    free(work);
}

/* attn_step for several sequences: sp is the {nt,3} position tensor
 * (positions, cells written, first cells read). Returns tg_run's status. */
static int attn_seq_step(const struct adims *d, const float *q, const float *k, const float *v,
                         float *kc, float *vc, const int32_t *sp, uint32_t nt, float *out,
                         struct baton_pool *pool)
{
    return attn_graph(d, q, k, v, kc, vc, sp, 3, nt, out, pool);
}

/* Several sequences in one KV cache ({nt,3} positions): three prompts
 * (5, 3 and 7 tokens) each prefilled in its own range of cells, then one
 * batch holding a decode token of each (in the order 2, 0, 1), give the
 * bits each sequence gives alone in a cache of its own, on 1 and 3
 * threads; a first cell past the cell written, or a cell past the cache,
 * is E_INDEX with nothing written; a {nt,2} position tensor is E_SHAPE. */
static void test_attention_sequences(void **state)
{
    enum { S = 3, L = 12, HD = 16, NH = 4, NKV = 2, MAXT = 8 };
    static const uint32_t plen[S] = {5, 3, 7}, order[S] = {2, 0, 1};
    const struct adims one = {HD, NH, NKV, L}, all = {HD, NH, NKV, S * L};
    const size_t qrow = NH * HD, krow = NKV * HD;
    static float q[S][MAXT * NH * HD], k[S][MAXT * NKV * HD], v[S][MAXT * NKV * HD];
    static float kc1[S][HD * L * NKV], vc1[S][HD * L * NKV], kc[HD * S * L * NKV],
        vc[HD * S * L * NKV];
    static float out1[S][MAXT * NH * HD], out[MAXT * NH * HD], dq[S * NH * HD],
        dk[S * NKV * HD], dv[S * NKV * HD];
    int32_t pos[MAXT], sp[3 * MAXT];
    struct baton_pool *pools[2];
    uint32_t s, t, p, g;

    (void)state;
    lcg_state = 5150;
    for (s = 0; s < S; s++)
        for (t = 0; t < MAXT * NH * HD; t++) {
            q[s][t] = lcg_float();
            if (t < MAXT * NKV * HD) {
                k[s][t] = lcg_float();
                v[s][t] = lcg_float();
            }
        }
    assert_int_equal(baton_pool_create(1, &pools[0]), 0);
    assert_int_equal(baton_pool_create(3, &pools[1]), 0);
    for (p = 0; p < 2; p++) {
        memset(kc1, 0, sizeof(kc1));
        memset(vc1, 0, sizeof(vc1));
        memset(kc, 0, sizeof(kc));
        memset(vc, 0, sizeof(vc));
        /* alone: the prompt (positions 0..n-1), then its decode token (n) */
        for (s = 0; s < S; s++) {
            for (t = 0; t <= plen[s]; t++)
                pos[t] = (int32_t)t;
            attn_step(&one, q[s], k[s], v[s], kc1[s], vc1[s], pos, plen[s], out1[s], pools[p]);
            attn_step(&one, q[s] + plen[s] * qrow, k[s] + plen[s] * krow, v[s] + plen[s] * krow,
                      kc1[s], vc1[s], pos + plen[s], 1, out1[s] + plen[s] * qrow, pools[p]);
        }
        /* together: each prompt in cells [s*L, s*L + n), then one batch */
        for (s = 0; s < S; s++) {
            const uint32_t n = plen[s];

            for (t = 0; t < n; t++) {
                sp[t] = (int32_t)t;
                sp[n + t] = (int32_t)(s * L + t);
                sp[2 * n + t] = (int32_t)(s * L);
            }
            assert_int_equal(attn_seq_step(&all, q[s], k[s], v[s], kc, vc, sp, n, out, pools[p]),
                             0);
            assert_memory_equal(out, out1[s], n * qrow * 4);
        }
        for (t = 0; t < S; t++) {
            s = order[t];
            memcpy(dq + t * qrow, q[s] + plen[s] * qrow, qrow * 4);
            memcpy(dk + t * krow, k[s] + plen[s] * krow, krow * 4);
            memcpy(dv + t * krow, v[s] + plen[s] * krow, krow * 4);
            sp[t] = (int32_t)plen[s];
            sp[S + t] = (int32_t)(s * L + plen[s]);
            sp[2 * S + t] = (int32_t)(s * L);
        }
        assert_int_equal(attn_seq_step(&all, dq, dk, dv, kc, vc, sp, S, out, pools[p]), 0);
        for (t = 0; t < S; t++) {
            s = order[t];
            assert_memory_equal(out + t * qrow, out1[s] + plen[s] * qrow, qrow * 4);
            for (g = 0; g < NKV; g++)
                assert_memory_equal(kc + ((size_t)g * S * L + s * L) * HD,
                                    kc1[s] + (size_t)g * L * HD, (plen[s] + 1) * HD * 4);
        }
    }
    /* bad cells: nothing written */
    memcpy(kc1[0], kc, sizeof(kc1[0]));
    sp[0] = 1, sp[1] = 4, sp[2] = 5; /* one token: position 1, cell 4, first 5 > 4 */
    assert_int_equal(attn_seq_step(&all, dq, dk, dv, kc, vc, sp, 1, out, pools[0]),
                     BATON_E_INDEX);
    sp[1] = S * L, sp[2] = 0; /* cell past the cache */
    assert_int_equal(attn_seq_step(&all, dq, dk, dv, kc, vc, sp, 1, out, pools[0]),
                     BATON_E_INDEX);
    sp[1] = 4, sp[2] = -1;
    assert_int_equal(attn_seq_step(&all, dq, dk, dv, kc, vc, sp, 1, out, pools[0]),
                     BATON_E_INDEX);
    assert_memory_equal(kc1[0], kc, sizeof(kc1[0]));
    baton_pool_destroy(pools[0]);
    baton_pool_destroy(pools[1]);
    {
        /* a {nt,2} position tensor */
        struct tg tt;
        uint32_t lq, lk, lv, lkc, lvc, lp;

        tg_init(&tt);
        lq = tg_leaf(&tt, BATON_TYPE_F32, HD, NH, 2, 1, dq);
        lk = tg_leaf(&tt, BATON_TYPE_F32, HD, NKV, 2, 1, dk);
        lv = tg_leaf(&tt, BATON_TYPE_F32, HD, NKV, 2, 1, dv);
        lkc = tg_leaf(&tt, BATON_TYPE_F32, HD, S * L, NKV, 1, kc);
        lvc = tg_leaf(&tt, BATON_TYPE_F32, HD, S * L, NKV, 1, vc);
        lp = tg_leaf(&tt, BATON_TYPE_I32, 2, 2, 1, 1, sp);
        tg_node(&tt, BATON_OP_ATTENTION, BATON_TYPE_F32, HD, NH, 2, 1,
                SRC6(lq, lk, lv, lkc, lvc, lp), P2(f32_bits(1.0f), 0));
        assert_int_equal(tg_validate(&tt, TG_MAX), BATON_E_SHAPE);
        tt.leaves[lp].ne[1] = 3;
        tt.leaves[lp].nb[2] = tt.leaves[lp].nb[3] = 24;
        tt.leaves[lp].nbytes = 24;
        assert_int_equal(tg_validate(&tt, TG_MAX), 0);
    }
}

static void test_attention_batch_equals_steps(void **state)
{
    const struct adims small = {8, 4, 2, 5}, large = {32, 8, 2, 24};

    (void)state;
    batch_equals_steps(&small, 3);
    batch_equals_steps(&large, 20);
    batch_equals_steps(&large, 23); /* token blocks of 4 (kernels.h), the last of 3 */
}

/* A leaf the graph writes may not overlap any other leaf (regression: an
 * adversarial client placed ATTENTION's positions inside its KV cache, and
 * a GET_ROWS out leaf over its ids; the first write changed indices that
 * had been checked, and the next write or read left the buffer). */
static void test_written_leaf_overlap(void **state)
{
    struct tg t;
    float tab[16] = {0}, out[8] = {0};
    int32_t ids[2] = {0, 0};
    uint32_t lt, li, lo, n;

    (void)state;
    /* GET_ROWS: out leaf over the ids (same buffer, overlapping bytes) */
    tg_init(&t);
    lt = tg_leaf(&t, BATON_TYPE_F32, 4, 4, 1, 1, tab);
    li = tg_leaf(&t, BATON_TYPE_I32, 2, 1, 1, 1, ids);
    lo = tg_leaf(&t, BATON_TYPE_F32, 4, 2, 1, 1, out);
    t.leaves[li].buffer = 77;
    t.leaves[li].offset = 4096;
    t.leaves[lo].buffer = 77;
    t.leaves[lo].offset = 4096;
    n = tg_node(&t, BATON_OP_GET_ROWS, BATON_TYPE_F32, 4, 2, 1, 1, SRC2(lt, li), NULL);
    tg_at(&t, n)->out_leaf = lo;
    assert_int_equal(tg_validate(&t, TG_MAX), BATON_E_GRAPH);
    /* one byte of overlap is enough; touching ranges are fine */
    t.leaves[lo].offset = 4096 + 7;
    assert_int_equal(tg_validate(&t, TG_MAX), BATON_E_GRAPH);
    t.leaves[lo].offset = 4096 + 8;
    assert_int_equal(tg_validate(&t, TG_MAX), 0);
    t.leaves[lo].offset = 4096 - 32;
    assert_int_equal(tg_validate(&t, TG_MAX), 0);
    /* a read-only leaf may overlap another read-only leaf */
    t.leaves[lt].buffer = 77;
    t.leaves[lt].offset = 4096;
    t.leaves[lo].offset = 4096 + 16; /* over the table (4096..4160), clear of the ids */
    assert_int_equal(tg_validate(&t, TG_MAX), BATON_E_GRAPH);
    t.leaves[lo].buffer = 78;
    assert_int_equal(tg_validate(&t, TG_MAX), 0); /* table over ids: both only read */
}

static void test_attention_cache_overlap(void **state)
{
    struct tg t;
    float q[16], k[16], v[16], kc[64], vc[64];
    int32_t pos[2] = {1, 0};
    uint32_t lq, lk, lv, lkc, lvc, lp;

    (void)state;
    tg_init(&t);
    lq = tg_leaf(&t, BATON_TYPE_F32, 8, 1, 2, 1, q);
    lk = tg_leaf(&t, BATON_TYPE_F32, 8, 1, 2, 1, k);
    lv = tg_leaf(&t, BATON_TYPE_F32, 8, 1, 2, 1, v);
    lkc = tg_leaf(&t, BATON_TYPE_F32, 8, 8, 1, 1, kc); /* {hd,n_ctx,nkv} */
    lvc = tg_leaf(&t, BATON_TYPE_F32, 8, 8, 1, 1, vc);
    lp = tg_leaf(&t, BATON_TYPE_I32, 2, 1, 1, 1, pos);
    tg_node(&t, BATON_OP_ATTENTION, BATON_TYPE_F32, 8, 1, 2, 1, SRC6(lq, lk, lv, lkc, lvc, lp),
            P2(f32_bits(1.0f), 0));
    assert_int_equal(tg_validate(&t, TG_MAX), 0);
    /* positions inside the K cache's slot 1 */
    t.leaves[lp].buffer = t.leaves[lkc].buffer;
    t.leaves[lp].offset = 32;
    assert_int_equal(tg_validate(&t, TG_MAX), BATON_E_GRAPH);
    /* k over the K cache */
    t.leaves[lp].buffer = 99;
    t.leaves[lk].buffer = t.leaves[lkc].buffer;
    t.leaves[lk].offset = 64;
    assert_int_equal(tg_validate(&t, TG_MAX), BATON_E_GRAPH);
    /* the two caches over each other */
    t.leaves[lk].buffer = 98;
    t.leaves[lvc].buffer = t.leaves[lkc].buffer;
    t.leaves[lvc].offset = 128;
    assert_int_equal(tg_validate(&t, TG_MAX), BATON_E_GRAPH);
    t.leaves[lvc].offset = 256; /* the K cache is 8*8*4 = 256 bytes: disjoint */
    assert_int_equal(tg_validate(&t, TG_MAX), 0);
}

static void test_flops_floor(void **state)
{
    struct tg t;
    uint32_t lw, lx;

    (void)state;
    /* K = 0: no multiply-adds, but N*M outputs are still written */
    tg_init(&t);
    lw = tg_leaf(&t, BATON_TYPE_F32, 0, 1000, 1, 1, NULL);
    lx = tg_leaf(&t, BATON_TYPE_F32, 0, 30, 1, 1, NULL);
    tg_node(&t, BATON_OP_MUL_MAT, BATON_TYPE_F32, 1000, 30, 1, 1, SRC2(lw, lx), NULL);
    assert_int_equal(baton_graph_flops(&t.g), 30000);

    /* ATTENTION with nh = 0 scores nothing but still writes k and v into
     * the caches: 2 * hd * nkv * nt (found by an adversarial review: the
     * estimate was 0, so such nodes escaped max_graph_flops) */
    {
        struct tg a;
        uint32_t lq, lk, lv, lkc, lvc, lp;

        tg_init(&a);
        lq = tg_leaf(&a, BATON_TYPE_F32, 64, 0, 8, 1, NULL);
        lk = tg_leaf(&a, BATON_TYPE_F32, 64, 4, 8, 1, NULL);
        lv = tg_leaf(&a, BATON_TYPE_F32, 64, 4, 8, 1, NULL);
        lkc = tg_leaf(&a, BATON_TYPE_F32, 64, 16, 4, 1, NULL);
        lvc = tg_leaf(&a, BATON_TYPE_F32, 64, 16, 4, 1, NULL);
        lp = tg_leaf(&a, BATON_TYPE_I32, 8, 1, 1, 1, NULL);
        tg_node(&a, BATON_OP_ATTENTION, BATON_TYPE_F32, 64, 0, 8, 1,
                SRC6(lq, lk, lv, lkc, lvc, lp), P1(f32_bits(1.0f)));
        assert_int_equal(baton_graph_flops(&a.g), 2 * 64 * 4 * 8);
    }
}

/* One ATTENTION node (no ROPE: k and v go into the cache as given) with
 * caches of types kt and vt, the result in an out leaf. Returns tg_run's
 * status. */
static int attn_typed(const struct adims *d, const float *q, const float *k, const float *v,
                      void *kc, void *vc, uint32_t kt, uint32_t vt, const int32_t *pos,
                      uint32_t nt, float *out, struct baton_pool *pool)
{
    struct tg t;
    uint32_t lq, lk, lv, lkc, lvc, lp, lo, a;

    tg_init(&t);
    lq = tg_leaf(&t, BATON_TYPE_F32, d->hd, d->nh, nt, 1, (void *)q);
    lk = tg_leaf(&t, BATON_TYPE_F32, d->hd, d->nkv, nt, 1, (void *)k);
    lv = tg_leaf(&t, BATON_TYPE_F32, d->hd, d->nkv, nt, 1, (void *)v);
    lkc = tg_leaf(&t, kt, d->hd, d->n_ctx, d->nkv, 1, kc);
    lvc = tg_leaf(&t, vt, d->hd, d->n_ctx, d->nkv, 1, vc);
    lp = tg_leaf(&t, BATON_TYPE_I32, nt, 1, 1, 1, (void *)pos);
    lo = tg_leaf(&t, BATON_TYPE_F32, d->hd, d->nh, nt, 1, out);
    a = tg_node(&t, BATON_OP_ATTENTION, BATON_TYPE_F32, d->hd, d->nh, nt, 1,
                SRC6(lq, lk, lv, lkc, lvc, lp), P1(f32_bits(1.0f / sqrtf((float)d->hd))));
    tg_at(&t, a)->out_leaf = lo;
    return tg_run(&t, pool);
}

/* ATTENTION over binary16 caches (--kv-type f16): k and v are rounded to
 * binary16 when written (baton_fp32_to_fp16); key rows are converted
 * exactly a window of 64 at a time, value rows as the weighted sum loads
 * them (baton_cpu_f16_wsum, with a scalar tail). With k and v already
 * binary16 values, an F16 cache gives the bits of an F32 cache holding the
 * same values: a prefill of 70 tokens (two windows and more), then decode
 * steps reading 141 and 150 cells (three windows, the last partial), hd 36
 * (a tail of 4 lanes), 2 kv heads for 4 query heads, on 1 and 3 threads and
 * at every SIMD level this CPU has; the caches then hold the same values.
 * Values that are no binary16 are stored rounded; mixed cache types, and a
 * cache of another type, are E_TYPE before anything runs. */
static void test_attention_f16_cache(void **state)
{
    enum { HD = 36, NH = 4, NKV = 2, NCTX = 150, NT = 70 };
    const struct adims d = {HD, NH, NKV, NCTX};
    static const uint32_t pools[] = {1, 3};
    static const int32_t dec_pos[] = {140, 149};
    const size_t ncache = (size_t)HD * NCTX * NKV;
    float *q = malloc(sizeof(float) * HD * NH * NT), *k = malloc(sizeof(float) * HD * NKV * NT),
          *v = malloc(sizeof(float) * HD * NKV * NT), *kcf = malloc(sizeof(float) * ncache),
          *vcf = malloc(sizeof(float) * ncache), *out16 = malloc(sizeof(float) * HD * NH * NT),
          *out32 = malloc(sizeof(float) * HD * NH * NT);
    uint16_t *kch = malloc(2 * ncache), *vch = malloc(2 * ncache);
    int32_t pos[NT];
    size_t i;

    (void)state;
    assert_non_null(q && k && v && kcf && vcf && out16 && out32 && kch && vch);
    for (int lvl = BATON_CPU_ISA_SCALAR; lvl <= BATON_CPU_ISA_AVX512; lvl++) {
        if ((int)baton_cpu_isa_set((enum baton_cpu_isa)lvl) != lvl) {
            print_message("attention f16: SIMD level %d not on this CPU, skipped\n", lvl);
            continue;
        }
        for (size_t p = 0; p < sizeof pools / sizeof pools[0]; p++) {
            struct baton_pool *pool;

            assert_int_equal(baton_pool_create(pools[p], &pool), 0);
            lcg_state = 99;
            /* caches: random binary16 values, and the same values as F32 */
            for (i = 0; i < ncache; i++) {
                kch[i] = baton_fp32_to_fp16(lcg_float());
                vch[i] = baton_fp32_to_fp16(lcg_float());
                kcf[i] = baton_fp16_to_fp32(kch[i]);
                vcf[i] = baton_fp16_to_fp32(vch[i]);
            }
            for (i = 0; i < (size_t)HD * NH * NT; i++)
                q[i] = lcg_float();
            for (i = 0; i < (size_t)HD * NKV * NT; i++) {
                k[i] = baton_fp16_to_fp32(baton_fp32_to_fp16(lcg_float()));
                v[i] = baton_fp16_to_fp32(baton_fp32_to_fp16(lcg_float()));
            }
            for (i = 0; i < NT; i++)
                pos[i] = (int32_t)i;
            assert_int_equal(attn_typed(&d, q, k, v, kch, vch, BATON_TYPE_F16, BATON_TYPE_F16, pos,
                                        NT, out16, pool), 0);
            assert_int_equal(attn_typed(&d, q, k, v, kcf, vcf, BATON_TYPE_F32, BATON_TYPE_F32, pos,
                                        NT, out32, pool), 0);
            assert_memory_equal(out16, out32, sizeof(float) * HD * NH * NT);
            for (size_t s = 0; s < sizeof dec_pos / sizeof dec_pos[0]; s++) {
                assert_int_equal(attn_typed(&d, q, k, v, kch, vch, BATON_TYPE_F16, BATON_TYPE_F16,
                                            &dec_pos[s], 1, out16, pool), 0);
                assert_int_equal(attn_typed(&d, q, k, v, kcf, vcf, BATON_TYPE_F32, BATON_TYPE_F32,
                                            &dec_pos[s], 1, out32, pool), 0);
                assert_memory_equal(out16, out32, sizeof(float) * HD * NH);
            }
            for (i = 0; i < ncache; i++) {
                assert_true(baton_fp16_to_fp32(kch[i]) == kcf[i]);
                assert_true(baton_fp16_to_fp32(vch[i]) == vcf[i]);
            }
            baton_pool_destroy(pool);
        }
    }
    baton_cpu_isa_set(BATON_CPU_ISA_AVX512);
    /* a value that is no binary16 is stored rounded to nearest even */
    {
        struct baton_pool *pool;
        const int32_t p0 = 3;

        assert_int_equal(baton_pool_create(1, &pool), 0);
        for (i = 0; i < (size_t)HD * NKV; i++) {
            k[i] = 1.0f + (float)(i + 1) * 0x1p-14f; /* between binary16 neighbours */
            v[i] = -3.0e-6f * (float)(i + 1);        /* binary16 subnormals */
        }
        assert_int_equal(attn_typed(&d, q, k, v, kch, vch, BATON_TYPE_F16, BATON_TYPE_F16, &p0,
                                    1, out16, pool), 0);
        for (i = 0; i < (size_t)HD * NKV; i++) {
            const size_t g = i / HD, at = (g * NCTX + (size_t)p0) * HD + i % HD;

            assert_int_equal(kch[at], baton_fp32_to_fp16(k[i]));
            assert_int_equal(vch[at], baton_fp32_to_fp16(v[i]));
        }
        /* mixed or other cache types */
        assert_int_equal(attn_typed(&d, q, k, v, kch, vcf, BATON_TYPE_F16, BATON_TYPE_F32, &p0, 1,
                                    out16, pool), BATON_E_TYPE);
        assert_int_equal(attn_typed(&d, q, k, v, kcf, vch, BATON_TYPE_F32, BATON_TYPE_F16, &p0, 1,
                                    out16, pool), BATON_E_TYPE);
        assert_int_equal(attn_typed(&d, q, k, v, kcf, vcf, BATON_TYPE_I32, BATON_TYPE_I32, &p0,
                                    1, out16, pool), BATON_E_TYPE);
        baton_pool_destroy(pool);
    }
    free(q);
    free(k);
    free(v);
    free(kcf);
    free(vcf);
    free(out16);
    free(out32);
    free(kch);
    free(vch);
}

/* ATTENTION's work area: min(nh x nt, 64) score rows of every cache cell
 * (baton_attention_work_bytes), the scratch a graph of one ATTENTION node
 * with an out leaf needs; hand-computed: with several sequences every
 * cell counts (the window is data), which is what makes --parallel N x
 * --ctx C reach the server's scratch limit. */
static void test_attention_work_bytes(void **state)
{
    static const struct {
        uint64_t hd, nh, nt, n_ctx, want;
    } cases[] = {
        {2, 8, 5, 100, 40 * 100 * 4},          /* 40 rows */
        {2, 8, 16, 100, 64 * 100 * 4},         /* 128 rows, at most 64 */
        {2, 8, 1, 100, 8 * 100 * 4},           /* a decode step of one sequence */
        {0, 8, 5, 100, 0},                     /* nothing to score */
        {8, 8, 5, 10000000, 1600000000ull},    /* --parallel 5 --ctx 2000000: 1.5 GiB */
        {2, 1ull << 32, 1ull << 32, 1, UINT64_MAX}, /* nh x nt wraps */
        {2, 8, 8, 1ull << 62, UINT64_MAX},     /* rows x cells x 4 wraps */
    };

    (void)state;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        assert_int_equal(baton_attention_work_bytes(cases[i].hd, cases[i].nh, cases[i].nt,
                                                    cases[i].n_ctx, 0),
                         cases[i].want);
    /* F16 caches add a window of 64 converted rows of hd floats per score
     * row: 40 rows x (100 cells + 64 x 2) x 4 bytes */
    assert_int_equal(baton_attention_work_bytes(2, 8, 5, 100, 1), 40 * (100 + 64 * 2) * 4);
    /* a decode step of the d768 model's 12 heads, hd 64, 192 cells */
    assert_int_equal(baton_attention_work_bytes(64, 12, 1, 192, 1), 12 * (192 + 64 * 64) * 4);
    assert_int_equal(baton_attention_work_bytes(1ull << 52, 8, 8, 1, 1), UINT64_MAX);
    /* the validator sizes the scratch so: 2 x 8 x 5 queries over 100 cells,
     * the result in an out leaf, so the scratch is the work area alone */
    for (uint32_t nt = 5; nt <= 16; nt += 11) {
        struct tg t;
        uint32_t lq, lk, lv, lkc, lvc, lp, lo, n;

        tg_init(&t);
        lq = tg_leaf(&t, BATON_TYPE_F32, 2, 8, nt, 1, NULL);
        lk = tg_leaf(&t, BATON_TYPE_F32, 2, 1, nt, 1, NULL);
        lv = tg_leaf(&t, BATON_TYPE_F32, 2, 1, nt, 1, NULL);
        lkc = tg_leaf(&t, BATON_TYPE_F32, 2, 100, 1, 1, NULL);
        lvc = tg_leaf(&t, BATON_TYPE_F32, 2, 100, 1, 1, NULL);
        lp = tg_leaf(&t, BATON_TYPE_I32, nt, 1, 1, 1, NULL);
        lo = tg_leaf(&t, BATON_TYPE_F32, 2, 8, nt, 1, NULL);
        n = tg_node(&t, BATON_OP_ATTENTION, BATON_TYPE_F32, 2, 8, nt, 1,
                    SRC6(lq, lk, lv, lkc, lvc, lp), P1(f32_bits(1.0f)));
        tg_at(&t, n)->out_leaf = lo;
        assert_int_equal(tg_validate(&t, 16), 0);
        assert_int_equal(t.scratch_bytes, (nt == 5 ? 40 : 64) * 100 * 4);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_valid_base),
        cmocka_unit_test(test_written_leaf_overlap),
        cmocka_unit_test(test_attention_cache_overlap),
        cmocka_unit_test(test_flops_floor),
        cmocka_unit_test(test_bad_arity_slot),
        cmocka_unit_test(test_unknown_op),
        cmocka_unit_test(test_source_from_later_node),
        cmocka_unit_test(test_shape_mismatch),
        cmocka_unit_test(test_broadcast_rules),
        cmocka_unit_test(test_declared_type_wrong),
        cmocka_unit_test(test_source_type_wrong),
        cmocka_unit_test(test_weight_types),
        cmocka_unit_test(test_k_weights),
        cmocka_unit_test(test_out_leaf_rules),
        cmocka_unit_test(test_out_leaf_is_own_source),
        cmocka_unit_test(test_reshape_rules),
        cmocka_unit_test(test_max_nodes),
        cmocka_unit_test(test_param_rules),
        cmocka_unit_test(test_attention_rules),
        cmocka_unit_test(test_leaf_descriptor_rechecked),
        cmocka_unit_test(test_size_overflow),
        cmocka_unit_test(test_chain_through_scratch),
        cmocka_unit_test(test_scratch_reuse_and_long_lived_values),
        cmocka_unit_test(test_out_leaf_result_read_later),
        cmocka_unit_test(test_misaligned_leaf_refused),
        cmocka_unit_test(test_mul_mat_deterministic),
        cmocka_unit_test(test_mul_mat_group_same_bits),
        cmocka_unit_test(test_turns_same_bits),
        cmocka_unit_test(test_mul_mat_group_dependent_not_grouped),
        cmocka_unit_test(test_attention_batch_equals_steps),
        cmocka_unit_test(test_attention_sequences),
        cmocka_unit_test(test_attention_work_rows),
        cmocka_unit_test(test_attention_work_bytes),
        cmocka_unit_test(test_attention_f16_cache),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
