/* Each op on a tiny case, against values computed by hand (decimal values
 * from the closed forms, checked to float precision). */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "test_compute_util.h"

#define TOL 1e-6f

static void assert_close(const float *got, const float *want, size_t n, float tol)
{
    size_t i;

    for (i = 0; i < n; i++) {
        const float d = fabsf(got[i] - want[i]);
        const float scale = fabsf(want[i]) > 1.0f ? fabsf(want[i]) : 1.0f;

        if (!(d <= tol * scale))
            fail_msg("element %zu: got %.9g want %.9g", i, (double)got[i], (double)want[i]);
    }
}

static void test_mul_mat_2x3_by_3x2(void **state)
{
    /* W rows (K=3): [1 2 3], [4 5 6]; x columns: [1 0 -1], [2 1 0].
     * y(n,m) = W_n . x_m: (0,0) = -2, (1,0) = -2, (0,1) = 4, (1,1) = 13. */
    float w[6] = {1, 2, 3, 4, 5, 6}, x[6] = {1, 0, -1, 2, 1, 0}, y[4] = {0};
    const float want[4] = {-2, -2, 4, 13};
    struct tg t;
    uint32_t lw, lx, ly, n;

    (void)state;
    tg_init(&t);
    lw = tg_leaf(&t, BATON_TYPE_F32, 3, 2, 1, 1, w);
    lx = tg_leaf(&t, BATON_TYPE_F32, 3, 2, 1, 1, x);
    ly = tg_leaf(&t, BATON_TYPE_F32, 2, 2, 1, 1, y);
    n = tg_node(&t, BATON_OP_MUL_MAT, BATON_TYPE_F32, 2, 2, 1, 1, SRC2(lw, lx), NULL);
    tg_at(&t, n)->out_leaf = ly;
    assert_int_equal(tg_run(&t, NULL), 0);
    assert_memory_equal(y, want, sizeof(want)); /* small integers: exact */
    assert_int_equal(t.plan[0].nbytes, 16);
    assert_int_equal(t.scratch_bytes, 0); /* result went to the out leaf */
    assert_int_equal(baton_graph_flops(&t.g), 2 * 3 * 2 * 2);
}

static void test_mul_mat_batched_dims(void **state)
{
    /* x {K=2, M=1, 2, 1}: the extra dimension is more columns. W = I * 3. */
    float w[4] = {3, 0, 0, 3}, x[4] = {1, 2, 5, 7}, y[4];
    const float want[4] = {3, 6, 15, 21};
    struct tg t;
    uint32_t lw, lx, ly, n;

    (void)state;
    tg_init(&t);
    lw = tg_leaf(&t, BATON_TYPE_F32, 2, 2, 1, 1, w);
    lx = tg_leaf(&t, BATON_TYPE_F32, 2, 1, 2, 1, x);
    ly = tg_leaf(&t, BATON_TYPE_F32, 2, 1, 2, 1, y);
    n = tg_node(&t, BATON_OP_MUL_MAT, BATON_TYPE_F32, 2, 1, 2, 1, SRC2(lw, lx), NULL);
    tg_at(&t, n)->out_leaf = ly;
    assert_int_equal(tg_run(&t, NULL), 0);
    assert_memory_equal(y, want, sizeof(want));
}

static void test_rms_norm(void **state)
{
    /* Row 0 {1,2,3,4}, eps 0: mean square 7.5, y = x / sqrt(7.5).
     * Row 1 {2,2,2,2}, eps 0: mean square 4, y = x / 2 = 1 (exact). */
    float x[8] = {1, 2, 3, 4, 2, 2, 2, 2}, y[8];
    const float want[8] = {0.36514837f, 0.73029674f, 1.09544512f, 1.46059349f, 1, 1, 1, 1};
    struct tg t;
    uint32_t lx, ly, n;

    (void)state;
    tg_init(&t);
    lx = tg_leaf(&t, BATON_TYPE_F32, 4, 2, 1, 1, x);
    ly = tg_leaf(&t, BATON_TYPE_F32, 4, 2, 1, 1, y);
    n = tg_node(&t, BATON_OP_RMS_NORM, BATON_TYPE_F32, 4, 2, 1, 1, SRC1(lx), P1(f32_bits(0.0f)));
    tg_at(&t, n)->out_leaf = ly;
    assert_int_equal(tg_run(&t, NULL), 0);
    assert_close(y, want, 8, TOL);
    assert_true(y[4] == 1.0f);

    /* eps 4 on {2,2,2,2}: 1/sqrt(4 + 4) = 0.35355339, y = 0.70710678. */
    tg_at(&t, n)->params[0] = f32_bits(4.0f);
    assert_int_equal(tg_run(&t, NULL), 0);
    assert_close(y + 4, (const float[4]){0.70710678f, 0.70710678f, 0.70710678f, 0.70710678f}, 4,
                 TOL);
}

static void test_add_mul_broadcast(void **state)
{
    float a[6] = {1, 2, 3, 4, 5, 6}, brow[3] = {10, 20, 30}, bcol[2] = {10, 100}, bone = 2,
          y[6];
    struct tg t;
    uint32_t la, lr, lc, l1, ly, n;

    (void)state;
    tg_init(&t);
    la = tg_leaf(&t, BATON_TYPE_F32, 3, 2, 1, 1, a);
    lr = tg_leaf(&t, BATON_TYPE_F32, 3, 1, 1, 1, brow);
    lc = tg_leaf(&t, BATON_TYPE_F32, 1, 2, 1, 1, bcol);
    l1 = tg_leaf(&t, BATON_TYPE_F32, 1, 1, 1, 1, &bone);
    ly = tg_leaf(&t, BATON_TYPE_F32, 3, 2, 1, 1, y);

    n = tg_node(&t, BATON_OP_ADD, BATON_TYPE_F32, 3, 2, 1, 1, SRC2(la, lr), NULL);
    tg_at(&t, n)->out_leaf = ly;
    assert_int_equal(tg_run(&t, NULL), 0);
    assert_memory_equal(y, ((const float[6]){11, 22, 33, 14, 25, 36}), sizeof(y));

    tg_at(&t, n)->src[1] = lc;
    assert_int_equal(tg_run(&t, NULL), 0);
    assert_memory_equal(y, ((const float[6]){11, 12, 13, 104, 105, 106}), sizeof(y));

    tg_at(&t, n)->op = BATON_OP_MUL;
    tg_at(&t, n)->src[1] = l1;
    assert_int_equal(tg_run(&t, NULL), 0);
    assert_memory_equal(y, ((const float[6]){2, 4, 6, 8, 10, 12}), sizeof(y));

    tg_at(&t, n)->src[1] = la;
    assert_int_equal(tg_run(&t, NULL), 0);
    assert_memory_equal(y, ((const float[6]){1, 4, 9, 16, 25, 36}), sizeof(y));
}

static void test_scale_silu(void **state)
{
    float x[4] = {1, -2, 0.5f, 0}, y[4];
    float s[4] = {0, 1, -1, 2};
    /* silu(x) = x / (1 + e^-x): 0, 0.73105858, -0.26894142, 1.76159416 */
    const float want_silu[4] = {0, 0.73105858f, -0.26894142f, 1.76159416f};
    struct tg t;
    uint32_t lx, ly, n;

    (void)state;
    tg_init(&t);
    lx = tg_leaf(&t, BATON_TYPE_F32, 4, 1, 1, 1, x);
    ly = tg_leaf(&t, BATON_TYPE_F32, 4, 1, 1, 1, y);
    n = tg_node(&t, BATON_OP_SCALE, BATON_TYPE_F32, 4, 1, 1, 1, SRC1(lx), P1(f32_bits(3.0f)));
    tg_at(&t, n)->out_leaf = ly;
    assert_int_equal(tg_run(&t, NULL), 0);
    assert_memory_equal(y, ((const float[4]){3, -6, 1.5f, 0}), sizeof(y));

    t.data[lx] = (uint8_t *)s;
    tg_at(&t, n)->op = BATON_OP_SILU;
    tg_at(&t, n)->params[0] = 0;
    assert_int_equal(tg_run(&t, NULL), 0);
    assert_close(y, want_silu, 4, TOL);
    assert_true(y[0] == 0.0f);

    /* GELU, tanh form: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) =
     * 0, 0.84119199, -0.15880801, 1.95459769 (in binary64) */
    tg_at(&t, n)->op = BATON_OP_GELU;
    assert_int_equal(tg_run(&t, NULL), 0);
    assert_close(y, ((const float[4]){0, 0.84119199f, -0.15880801f, 1.95459769f}), 4, TOL);
    assert_true(y[0] == 0.0f);
    /* far tails: -20 -> 0 (e^(-z) overflows to inf), 20 -> 20 exactly; NaN stays NaN */
    s[0] = -20.0f;
    s[1] = 20.0f;
    s[2] = NAN;
    s[3] = 0.5f;
    assert_int_equal(tg_run(&t, NULL), 0);
    assert_true(y[0] == 0.0f && y[1] == 20.0f && isnan(y[2]));
    assert_close(y + 3, ((const float[1]){0.34571401f}), 1, TOL);
    /* GELU reads no parameter */
    tg_at(&t, n)->params[0] = 1;
    assert_int_equal(tg_validate(&t, 16), BATON_E_INVAL);
}

static void test_rope(void **state)
{
    /* x {hd 4, nh 1, nt 2}, pos {0, 1}, n_dims 4, base 10000.
     * Pair 0 of token 1: theta = 1 * 1 = 1; (1, 0) -> (cos 1, sin 1).
     * Pair 1 of token 1: theta = 1 / 10000^(2/4) = 0.01; (0, 1) -> (-sin 0.01, cos 0.01).
     * Token 0 (pos 0): unchanged. */
    float x[8] = {1, 0, 0, 1, 1, 0, 0, 1}, y[8];
    int32_t pos[2] = {0, 1};
    const float want[8] = {1, 0, 0, 1, 0.54030231f, 0.84147098f, -0.0099998333f, 0.99995000f};
    struct tg t;
    uint32_t lx, lp, ly, n;

    (void)state;
    tg_init(&t);
    lx = tg_leaf(&t, BATON_TYPE_F32, 4, 1, 2, 1, x);
    lp = tg_leaf(&t, BATON_TYPE_I32, 2, 1, 1, 1, pos);
    ly = tg_leaf(&t, BATON_TYPE_F32, 4, 1, 2, 1, y);
    n = tg_node(&t, BATON_OP_ROPE, BATON_TYPE_F32, 4, 1, 2, 1, SRC2(lx, lp),
                P3(4, f32_bits(10000.0f), 0));
    tg_at(&t, n)->out_leaf = ly;
    assert_int_equal(tg_run(&t, NULL), 0);
    assert_close(y, want, 8, TOL);
    assert_memory_equal(y, x, 4 * sizeof(float)); /* pos 0: cos 0 = 1, sin 0 = 0 exactly */

    /* n_dims 2: dims 2 and 3 pass through unchanged. */
    tg_at(&t, n)->params[0] = 2;
    assert_int_equal(tg_run(&t, NULL), 0);
    assert_close(y + 4, (const float[4]){0.54030231f, 0.84147098f, 0, 1}, 4, TOL);
    assert_true(y[6] == 0.0f && y[7] == 1.0f);

    /* NeoX mode (2): pair i is (x[i], x[i + 2]). Token 1, x = (1, 0, 0, 1):
     * pair 0 = (x0, x2) = (1, 0), theta 1 -> (cos 1, sin 1) into x0, x2;
     * pair 1 = (x1, x3) = (0, 1), theta 0.01 -> (-sin 0.01, cos 0.01). */
    tg_at(&t, n)->params[0] = 4;
    tg_at(&t, n)->params[2] = 2;
    assert_int_equal(tg_run(&t, NULL), 0);
    assert_close(y + 4, (const float[4]){0.54030231f, -0.0099998333f, 0.84147098f, 0.99995000f},
                 4, TOL);
    assert_memory_equal(y, x, 4 * sizeof(float));
    tg_at(&t, n)->params[2] = 0;

    /* p3 freq_scale 0.5 (linear rope scaling): the angles halve, 0.5 and 0.005 */
    tg_at(&t, n)->params[3] = f32_bits(0.5f);
    assert_int_equal(tg_run(&t, NULL), 0);
    assert_close(y + 4, (const float[4]){0.87758256f, 0.47942554f, -0.0049999792f, 0.99998750f},
                 4, TOL);
    assert_memory_equal(y, x, 4 * sizeof(float));
    /* 1 is no scaling: the same bits as p3 = 0 */
    {
        float y0[8];

        tg_at(&t, n)->params[3] = 0;
        assert_int_equal(tg_run(&t, NULL), 0);
        memcpy(y0, y, sizeof(y));
        tg_at(&t, n)->params[3] = f32_bits(1.0f);
        assert_int_equal(tg_run(&t, NULL), 0);
        assert_memory_equal(y, y0, sizeof(y));
    }
    /* a scale that is not finite and positive is refused */
    tg_at(&t, n)->params[3] = f32_bits(-0.5f);
    assert_int_equal(tg_validate(&t, 16), BATON_E_INVAL);
    tg_at(&t, n)->params[3] = f32_bits(NAN);
    assert_int_equal(tg_validate(&t, 16), BATON_E_INVAL);
    tg_at(&t, n)->params[3] = f32_bits(INFINITY);
    assert_int_equal(tg_validate(&t, 16), BATON_E_INVAL);
    tg_at(&t, n)->params[3] = 0;

    /* A negative position is an index error, nothing written. */
    pos[1] = -1;
    memset(y, 0x7f, sizeof(y));
    assert_int_equal(tg_run(&t, NULL), BATON_E_INDEX);
    assert_true(((const uint8_t *)y)[0] == 0x7f && ((const uint8_t *)y)[31] == 0x7f);
}

static void test_rope_freqs(void **state)
{
    /* ROPE_FREQS: ROPE whose pair angles are divided by factors {2, 4}.
     * Token 1 (pos 1): pair 0 theta = 1 / 2 = 0.5, (1, 0) -> (cos .5, sin .5);
     * pair 1 theta = 0.01 / 4 = 0.0025, (0, 1) -> (-sin .0025, cos .0025).
     * NeoX mode pairs (x0, x2) and (x1, x3) with the same angles. */
    float x[8] = {1, 0, 0, 1, 1, 0, 0, 1}, y[8], f[2] = {2, 4};
    int32_t pos[2] = {0, 1};
    struct tg t;
    uint32_t lx, lp, lf, ly, n;

    (void)state;
    tg_init(&t);
    lx = tg_leaf(&t, BATON_TYPE_F32, 4, 1, 2, 1, x);
    lp = tg_leaf(&t, BATON_TYPE_I32, 2, 1, 1, 1, pos);
    lf = tg_leaf(&t, BATON_TYPE_F32, 2, 1, 1, 1, f);
    ly = tg_leaf(&t, BATON_TYPE_F32, 4, 1, 2, 1, y);
    n = tg_node(&t, BATON_OP_ROPE_FREQS, BATON_TYPE_F32, 4, 1, 2, 1,
                ((const uint32_t[6]){lx, lp, lf, NONE, NONE, NONE}),
                P3(4, f32_bits(10000.0f), 0));
    tg_at(&t, n)->out_leaf = ly;
    assert_int_equal(tg_run(&t, NULL), 0);
    assert_close(y + 4, (const float[4]){0.87758256f, 0.47942554f, -0.0024999974f, 0.99999688f},
                 4, TOL);
    assert_memory_equal(y, x, 4 * sizeof(float));
    tg_at(&t, n)->params[2] = 2;
    assert_int_equal(tg_run(&t, NULL), 0);
    assert_close(y + 4, (const float[4]){0.87758256f, -0.0024999974f, 0.47942554f, 0.99999688f},
                 4, TOL);

    /* the factors must be F32 {n_dims / 2} */
    tg_at(&t, n)->params[0] = 2; /* n_dims 2: one factor */
    assert_int_equal(tg_validate(&t, 16), BATON_E_SHAPE);
    tg_at(&t, n)->params[0] = 4;
    t.leaves[lf].type = BATON_TYPE_I32;
    assert_int_equal(tg_validate(&t, 16), BATON_E_TYPE);
    t.leaves[lf].type = BATON_TYPE_F32;
    assert_int_equal(tg_validate(&t, 16), 0);
}

/* Attention fixture: hd 2, nh 1, nkv 1, tokens at positions 0 and 1,
 * n_ctx 3, scale 1.
 * q0 = (1,0), q1 = (0,1); k0 = (1,0), k1 = (0,2); v0 = (1,2), v1 = (3,4).
 * Token 0 sees slot 0 only: out = v0.
 * Token 1: scores (q1.k0, q1.k1) = (0, 2), p = (1/(1+e^2), e^2/(1+e^2))
 *          = (0.11920292, 0.88079708); out = v0 + 2 p1 (1,1) = (2.76159416, 3.76159416). */
struct attn_fix {
    float q[4], k[4], v[4], kc[6], vc[6], out[4];
    int32_t pos[6]; /* {2} or, with rows 3, {2,3}: positions, cells written, first cells */
    struct tg t;
    uint32_t node;
};

/* The fixture with pos of pos_rows rows (1, or 3: ATTENTION's several-sequence
 * form, cells 0 and 1 written, both first cells 0). */
static void attn_setup_rows(struct attn_fix *f, uint32_t pos_rows)
{
    const float q[4] = {1, 0, 0, 1}, k[4] = {1, 0, 0, 2}, v[4] = {1, 2, 3, 4};
    uint32_t lq, lk, lv, lkc, lvc, lp, lo;

    memcpy(f->q, q, sizeof(q));
    memcpy(f->k, k, sizeof(k));
    memcpy(f->v, v, sizeof(v));
    for (int i = 0; i < 6; i++)
        f->kc[i] = f->vc[i] = -9.0f; /* sentinel: slot 2 must stay */
    for (int i = 0; i < 6; i++)
        f->pos[i] = i < 4 ? i % 2 : 0;
    tg_init(&f->t);
    lq = tg_leaf(&f->t, BATON_TYPE_F32, 2, 1, 2, 1, f->q);
    lk = tg_leaf(&f->t, BATON_TYPE_F32, 2, 1, 2, 1, f->k);
    lv = tg_leaf(&f->t, BATON_TYPE_F32, 2, 1, 2, 1, f->v);
    lkc = tg_leaf(&f->t, BATON_TYPE_F32, 2, 3, 1, 1, f->kc); /* {hd,n_ctx,nkv} */
    lvc = tg_leaf(&f->t, BATON_TYPE_F32, 2, 3, 1, 1, f->vc);
    lp = tg_leaf(&f->t, BATON_TYPE_I32, 2, pos_rows, 1, 1, f->pos);
    lo = tg_leaf(&f->t, BATON_TYPE_F32, 2, 1, 2, 1, f->out);
    f->node = tg_node(&f->t, BATON_OP_ATTENTION, BATON_TYPE_F32, 2, 1, 2, 1,
                      SRC6(lq, lk, lv, lkc, lvc, lp), P1(f32_bits(1.0f)));
    tg_at(&f->t, f->node)->out_leaf = lo;
}

static void attn_setup(struct attn_fix *f)
{
    attn_setup_rows(f, 1);
}

static void test_attention_one_head_two_positions(void **state)
{
    struct attn_fix f;
    const float want[4] = {1, 2, 2.76159416f, 3.76159416f};

    (void)state;
    attn_setup(&f);
    assert_int_equal(tg_run(&f.t, NULL), 0);
    assert_close(f.out, want, 4, TOL);
    assert_true(f.out[0] == 1.0f && f.out[1] == 2.0f); /* one slot: p = 1 exactly */
    assert_memory_equal(f.kc, ((const float[6]){1, 0, 0, 2, -9, -9}), sizeof(f.kc));
    assert_memory_equal(f.vc, ((const float[6]){1, 2, 3, 4, -9, -9}), sizeof(f.vc));
    /* 4 * hd * nh * nt * n_ctx */
    assert_int_equal(baton_graph_flops(&f.t.g), 4 * 2 * 1 * 2 * 3);

    /* Same with scale 0.5 in divide mode (score / 0.5 = 2 * score):
     * token 1 scores (0, 4): p1 = e^4/(1+e^4) = 0.98201379, out = (2.96402758, 3.96402758). */
    attn_setup(&f);
    tg_at(&f.t, f.node)->params[0] = f32_bits(0.5f);
    tg_at(&f.t, f.node)->params[1] = 1;
    assert_int_equal(tg_run(&f.t, NULL), 0);
    assert_close(f.out + 2, (const float[2]){2.96402758f, 3.96402758f}, 2, TOL);

    /* A sliding window of 1 cell (p2): each token sees only its own cell, so
     * token 1's output is v1 exactly; a window of 2 is the full causal one. */
    attn_setup(&f);
    tg_at(&f.t, f.node)->params[2] = 1;
    assert_int_equal(tg_run(&f.t, NULL), 0);
    assert_memory_equal(f.out, ((const float[4]){1, 2, 3, 4}), sizeof(f.out));
    attn_setup(&f);
    tg_at(&f.t, f.node)->params[2] = 2;
    assert_int_equal(tg_run(&f.t, NULL), 0);
    assert_close(f.out, want, 4, TOL);
}

static void test_attention_position_out_of_range(void **state)
{
    struct attn_fix f;
    float kc_before[6], out_before[4];

    (void)state;
    attn_setup(&f);
    f.pos[1] = 3; /* n_ctx is 3 */
    memset(f.out, 0x55, sizeof(f.out));
    memcpy(kc_before, f.kc, sizeof(kc_before));
    memcpy(out_before, f.out, sizeof(out_before));
    assert_int_equal(tg_run(&f.t, NULL), BATON_E_INDEX);
    /* checked before anything was written, token 0's slot included */
    assert_memory_equal(f.kc, kc_before, sizeof(kc_before));
    assert_memory_equal(f.out, out_before, sizeof(out_before));

    attn_setup(&f);
    f.pos[0] = -1;
    assert_int_equal(tg_run(&f.t, NULL), BATON_E_INDEX);
    assert_memory_equal(f.kc, kc_before, sizeof(kc_before));
}

/* A negative first cell (row 2 of pos {nt,3}) is E_INDEX before any write,
 * also when a sliding window would raise it to a valid cell. */
static void test_attention_first_cell_under_window(void **state)
{
    struct attn_fix f;

    (void)state;
    attn_setup_rows(&f, 3);
    tg_at(&f.t, f.node)->params[2] = 1; /* a window of 1 cell */
    f.pos[5] = -1;                       /* token 1's first cell */
    assert_int_equal(tg_run(&f.t, NULL), BATON_E_INDEX);
    assert_memory_equal(f.kc, ((const float[6]){-9, -9, -9, -9, -9, -9}), sizeof(f.kc));
    f.pos[5] = INT32_MIN;
    assert_int_equal(tg_run(&f.t, NULL), BATON_E_INDEX);
    /* a valid first cell: window 1, each token reads its own cell */
    f.pos[5] = 0;
    assert_int_equal(tg_run(&f.t, NULL), 0);
    assert_memory_equal(f.out, ((const float[4]){1, 2, 3, 4}), sizeof(f.out));
}

/* Without a scratch arena ATTENTION cannot run when it has score rows to
 * keep (E_INVAL before any node runs); with n_ctx = 0 there are none, and
 * every position is out of range (E_INDEX). n_ctx is the caches' ne[1]
 * ({hd, n_ctx, nkv}). */
static void test_attention_needs_score_rows(void **state)
{
    struct attn_fix f;
    float q[2] = {1, 0}, k[2] = {1, 0}, v[2] = {1, 2}, out[2];
    int32_t pos[1] = {0};
    struct tg t;
    uint32_t lq, lk, lv, lkc, lvc, lp, lo, n;

    (void)state;
    attn_setup(&f);
    assert_int_equal(tg_validate(&f.t, TG_MAX), 0);
    assert_int_equal(baton_graph_execute(&f.t.g, f.t.data, f.t.plan, NULL, NULL), BATON_E_INVAL);

    tg_init(&t);
    lq = tg_leaf(&t, BATON_TYPE_F32, 2, 1, 1, 1, q);
    lk = tg_leaf(&t, BATON_TYPE_F32, 2, 1, 1, 1, k);
    lv = tg_leaf(&t, BATON_TYPE_F32, 2, 1, 1, 1, v);
    lkc = tg_leaf(&t, BATON_TYPE_F32, 2, 0, 1, 1, NULL); /* n_ctx 0 */
    lvc = tg_leaf(&t, BATON_TYPE_F32, 2, 0, 1, 1, NULL);
    lp = tg_leaf(&t, BATON_TYPE_I32, 1, 1, 1, 1, pos);
    lo = tg_leaf(&t, BATON_TYPE_F32, 2, 1, 1, 1, out);
    n = tg_node(&t, BATON_OP_ATTENTION, BATON_TYPE_F32, 2, 1, 1, 1,
                SRC6(lq, lk, lv, lkc, lvc, lp), P1(f32_bits(1.0f)));
    tg_at(&t, n)->out_leaf = lo;
    assert_int_equal(tg_validate(&t, TG_MAX), 0);
    assert_int_equal(t.scratch_bytes, 0);
    assert_int_equal(baton_graph_execute(&t.g, t.data, t.plan, NULL, NULL), BATON_E_INDEX);
}

static void test_attention_grouped_query(void **state)
{
    /* nh 2, nkv 1, one token at position 1, slot 0 already cached.
     * Cache slot 0: k = (1,0), v = (1,2); new token: k = (0,2), v = (3,4).
     * Head 0 q = (0,1): scores (0,2) -> out (2.76159416, 3.76159416) as above.
     * Head 1 q = (1,0): scores (1,0) -> p0 = e/(1+e) = 0.73105858,
     *   out = v1 + p0 (v0 - v1) = (3 - 2 p0, 4 - 2 p0) = (1.53788284, 2.53788284). */
    float q[4] = {0, 1, 1, 0}, k[2] = {0, 2}, v[2] = {3, 4};
    float kc[4] = {1, 0, 0, 0}, vc[4] = {1, 2, 0, 0}, out[4];
    int32_t pos[1] = {1};
    const float want[4] = {2.76159416f, 3.76159416f, 1.53788284f, 2.53788284f};
    struct tg t;
    uint32_t lq, lk, lv, lkc, lvc, lp, lo, n;

    (void)state;
    tg_init(&t);
    lq = tg_leaf(&t, BATON_TYPE_F32, 2, 2, 1, 1, q);
    lk = tg_leaf(&t, BATON_TYPE_F32, 2, 1, 1, 1, k);
    lv = tg_leaf(&t, BATON_TYPE_F32, 2, 1, 1, 1, v);
    lkc = tg_leaf(&t, BATON_TYPE_F32, 2, 2, 1, 1, kc); /* {hd,n_ctx,nkv} */
    lvc = tg_leaf(&t, BATON_TYPE_F32, 2, 2, 1, 1, vc);
    lp = tg_leaf(&t, BATON_TYPE_I32, 1, 1, 1, 1, pos);
    lo = tg_leaf(&t, BATON_TYPE_F32, 2, 2, 1, 1, out);
    n = tg_node(&t, BATON_OP_ATTENTION, BATON_TYPE_F32, 2, 2, 1, 1,
                SRC6(lq, lk, lv, lkc, lvc, lp), P1(f32_bits(1.0f)));
    tg_at(&t, n)->out_leaf = lo;
    assert_int_equal(tg_run(&t, NULL), 0);
    assert_close(out, want, 4, TOL);
    assert_memory_equal(kc, ((const float[4]){1, 0, 0, 2}), sizeof(kc));
    assert_memory_equal(vc, ((const float[4]){1, 2, 3, 4}), sizeof(vc));
}

static void test_get_rows(void **state)
{
    float table[6] = {1, 2, 3, 4, 5, 6}, y[4];
    int32_t ids[2] = {2, 0};
    struct tg t;
    uint32_t lt, li, ly, n;

    (void)state;
    tg_init(&t);
    lt = tg_leaf(&t, BATON_TYPE_F32, 2, 3, 1, 1, table);
    li = tg_leaf(&t, BATON_TYPE_I32, 2, 1, 1, 1, ids);
    ly = tg_leaf(&t, BATON_TYPE_F32, 2, 2, 1, 1, y);
    n = tg_node(&t, BATON_OP_GET_ROWS, BATON_TYPE_F32, 2, 2, 1, 1, SRC2(lt, li), NULL);
    tg_at(&t, n)->out_leaf = ly;
    assert_int_equal(tg_run(&t, NULL), 0);
    assert_memory_equal(y, ((const float[4]){5, 6, 1, 2}), sizeof(y));

    /* Out-of-range ids: nothing copied, not even the valid first row. */
    ids[0] = 1;
    ids[1] = 3;
    memset(y, 0, sizeof(y));
    assert_int_equal(tg_run(&t, NULL), BATON_E_INDEX);
    assert_memory_equal(y, ((const float[4]){0, 0, 0, 0}), sizeof(y));
    ids[1] = -1;
    assert_int_equal(tg_run(&t, NULL), BATON_E_INDEX);
    ids[1] = INT32_MIN;
    assert_int_equal(tg_run(&t, NULL), BATON_E_INDEX);
}

static void test_argmax(void **state)
{
    /* row 0: tie between 1 and 2 -> first (1); row 1: NaNs skipped -> 3;
     * row 2: all NaN -> 0; row 3: -inf then -1 -> 1. */
    float x[16] = {1, 3, 3, 2, NAN, -1, NAN, -0.5f, NAN, NAN, NAN, NAN, -INFINITY, -1, -2, -3};
    int32_t y[4] = {-7, -7, -7, -7};
    struct tg t;
    uint32_t lx, ly, n;

    (void)state;
    tg_init(&t);
    lx = tg_leaf(&t, BATON_TYPE_F32, 4, 4, 1, 1, x);
    ly = tg_leaf(&t, BATON_TYPE_I32, 4, 1, 1, 1, y);
    n = tg_node(&t, BATON_OP_ARGMAX, BATON_TYPE_I32, 4, 1, 1, 1, SRC1(lx), NULL);
    tg_at(&t, n)->out_leaf = ly;
    assert_int_equal(tg_run(&t, NULL), 0);
    assert_memory_equal(y, ((const int32_t[4]){1, 3, 0, 1}), sizeof(y));
}

/* One SAMPLE node over logits {k, m} with params {6, m} into y. */
static int sample_run(const float *x, uint32_t k, uint32_t m, const int32_t *p, int32_t *y)
{
    struct tg t;
    uint32_t lx, lp, ly, n;

    tg_init(&t);
    lx = tg_leaf(&t, BATON_TYPE_F32, k, m, 1, 1, (void *)x);
    lp = tg_leaf(&t, BATON_TYPE_I32, 6, m, 1, 1, (void *)p);
    ly = tg_leaf(&t, BATON_TYPE_I32, m, 1, 1, 1, y);
    n = tg_node(&t, BATON_OP_SAMPLE, BATON_TYPE_I32, m, 1, 1, 1, SRC2(lx, lp), NULL);
    tg_at(&t, n)->out_leaf = ly;
    return tg_run(&t, NULL);
}

static void sample_params(int32_t *p, float temp, float top_p, uint32_t top_k, uint64_t seed,
                          uint32_t counter)
{
    memcpy(&p[0], &temp, 4);
    memcpy(&p[1], &top_p, 4);
    p[2] = (int32_t)top_k;
    p[3] = (int32_t)(uint32_t)seed;
    p[4] = (int32_t)(uint32_t)(seed >> 32);
    p[5] = (int32_t)counter;
}

/* SAMPLE: temperature 0, top_k 1 and a tiny top_p give the first maximum;
 * a NaN logit is never drawn; over 4 equal logits, 400 counters draw every
 * id about equally (each 60..140 times) and the same parameters draw the
 * same ids, row by row or in one batch; top_k 2 draws only the 2 largest,
 * ties broken by the lower id; a bad temperature or top_p is E_INVAL with
 * nothing written. */
static void test_sample(void **state)
{
    float x[8] = {0.5f, 2.0f, 2.0f, NAN, 1, 1, 1, 1};
    int32_t p[6 * 400], y[400], y1[1], seen[4] = {0};
    float uni[4 * 400];
    uint32_t i;

    (void)state;
    sample_params(p, 0.0f, 1.0f, 0, 1, 0);
    assert_int_equal(sample_run(x, 4, 1, p, y), 0);
    assert_int_equal(y[0], 1);
    for (i = 0; i < 50; i++) {
        sample_params(p, 1.0f, 1.0f, 1, 9, i);
        assert_int_equal(sample_run(x, 4, 1, p, y), 0);
        assert_int_equal(y[0], 1); /* top_k 1: the first of the tied maxima */
        sample_params(p, 1.0f, 1e-6f, 0, 9, i);
        assert_int_equal(sample_run(x, 4, 1, p, y), 0);
        assert_int_equal(y[0], 1);
        sample_params(p, 100.0f, 1.0f, 2, 9, i);
        assert_int_equal(sample_run(x, 4, 1, p, y), 0);
        assert_true(y[0] == 1 || y[0] == 2);
        sample_params(p, 100.0f, 1.0f, 0, 9, i);
        assert_int_equal(sample_run(x, 4, 1, p, y), 0);
        assert_true(y[0] >= 0 && y[0] <= 2); /* never the NaN */
    }
    for (i = 0; i < 400; i++) {
        memcpy(uni + 4 * i, x + 4, 4 * sizeof(float));
        sample_params(p + 6 * i, 0.7f, 1.0f, 0, 12345, i);
    }
    assert_int_equal(sample_run(uni, 4, 400, p, y), 0);
    for (i = 0; i < 400; i++) {
        assert_true(y[i] >= 0 && y[i] < 4);
        seen[y[i]]++;
        assert_int_equal(sample_run(uni + 4 * i, 4, 1, p + 6 * i, y1), 0);
        assert_int_equal(y1[0], y[i]);
    }
    for (i = 0; i < 4; i++)
        assert_true(seen[i] >= 60 && seen[i] <= 140);
    y[0] = -7;
    sample_params(p, NAN, 1.0f, 0, 1, 0);
    assert_int_equal(sample_run(x, 4, 1, p, y), BATON_E_INVAL);
    sample_params(p, 1.0f, 0.0f, 0, 1, 0);
    assert_int_equal(sample_run(x, 4, 1, p, y), BATON_E_INVAL);
    sample_params(p, 1.0f, 1.5f, 0, 1, 0);
    assert_int_equal(sample_run(x, 4, 1, p, y), BATON_E_INVAL);
    assert_int_equal(y[0], -7);
}

static void test_reshape_is_a_view(void **state)
{
    /* {2,3} -> RESHAPE {6} -> SCALE 2 into a {6} leaf; and RESHAPE of I32
     * ids feeding GET_ROWS. The RESHAPE takes no scratch. */
    float x[6] = {1, 2, 3, 4, 5, 6}, y[6], table[4] = {7, 8, 9, 10}, r[4];
    int32_t ids[2] = {1, 0};
    struct tg t;
    uint32_t lx, ly, lt, li, lr, v, s, vi, g;

    (void)state;
    tg_init(&t);
    lx = tg_leaf(&t, BATON_TYPE_F32, 2, 3, 1, 1, x);
    ly = tg_leaf(&t, BATON_TYPE_F32, 6, 1, 1, 1, y);
    lt = tg_leaf(&t, BATON_TYPE_F32, 2, 2, 1, 1, table);
    li = tg_leaf(&t, BATON_TYPE_I32, 1, 2, 1, 1, ids);
    lr = tg_leaf(&t, BATON_TYPE_F32, 2, 2, 1, 1, r);
    v = tg_node(&t, BATON_OP_RESHAPE, BATON_TYPE_F32, 6, 1, 1, 1, SRC1(lx), NULL);
    s = tg_node(&t, BATON_OP_SCALE, BATON_TYPE_F32, 6, 1, 1, 1, SRC1(v), P1(f32_bits(2.0f)));
    tg_at(&t, s)->out_leaf = ly;
    vi = tg_node(&t, BATON_OP_RESHAPE, BATON_TYPE_I32, 2, 1, 1, 1, SRC1(li), NULL);
    g = tg_node(&t, BATON_OP_GET_ROWS, BATON_TYPE_F32, 2, 2, 1, 1, SRC2(lt, vi), NULL);
    tg_at(&t, g)->out_leaf = lr;
    assert_int_equal(tg_run(&t, NULL), 0);
    assert_memory_equal(y, ((const float[6]){2, 4, 6, 8, 10, 12}), sizeof(y));
    assert_memory_equal(r, ((const float[4]){9, 10, 7, 8}), sizeof(r));
    assert_int_equal(t.scratch_bytes, 0);
    assert_int_equal(t.plan[0].nbytes, 24);
    assert_int_equal(t.plan[0].scratch_offset, lx); /* aliases leaf x */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_mul_mat_2x3_by_3x2),
        cmocka_unit_test(test_mul_mat_batched_dims),
        cmocka_unit_test(test_rms_norm),
        cmocka_unit_test(test_add_mul_broadcast),
        cmocka_unit_test(test_scale_silu),
        cmocka_unit_test(test_rope),
        cmocka_unit_test(test_rope_freqs),
        cmocka_unit_test(test_attention_one_head_two_positions),
        cmocka_unit_test(test_attention_position_out_of_range),
        cmocka_unit_test(test_attention_first_cell_under_window),
        cmocka_unit_test(test_attention_grouped_query),
        cmocka_unit_test(test_attention_needs_score_rows),
        cmocka_unit_test(test_get_rows),
        cmocka_unit_test(test_argmax),
        cmocka_unit_test(test_sample),
        cmocka_unit_test(test_reshape_is_a_view),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
