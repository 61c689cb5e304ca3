/* kq_ref: what llama.cpp's ggml makes of the K-quant test data of kq_gen.h.
 * Our own program; it only calls ggml's public API (ggml.h's
 * ggml_get_type_traits, ggml-cpu.h's ggml_get_type_traits_cpu) of the
 * llama.cpp build that make-fixtures.sh names, and links nothing of it into
 * baton.
 *
 *   kq_ref OUTDIR
 *
 * writes, for each K type t = Q2_K..Q6_K (name q2_k..q6_k):
 *   OUTDIR/kq-NAME.dequant.f32  KQ_GEN_K little-endian binary32: ggml's
 *       to_float of the KQ_GEN_NB super-blocks kq_gen_blocks(t) makes;
 * and OUTDIR/kq-vecdot.txt, one line per type and activation vector v:
 *       NAME v RESULT
 *   RESULT (C99 %a hex float) = the CPU backend's vec_dot of the same row of
 *   KQ_GEN_K elements with kq_gen_x(v) quantized to Q8_K by the CPU
 *   backend's from_float (what ggml's MUL_MAT does with a K weight).
 * Likewise for Q5_0 / Q5_1 (names q5_0, q5_1; kq_gen_q5_blocks): the
 * dequantized floats in kq-NAME.dequant.f32, the vec_dot (with x quantized to
 * the type's vec_dot_type, Q8_0 / Q8_1) in kq-vecdot.txt, and
 *   OUTDIR/kq-NAME.quant.bin    ggml's reference quantizer (from_float_ref,
 *       what llama-quantize uses without an importance matrix) applied to
 *       kq_gen_x(0): KQ_GEN_Q5_NB blocks.
 * And for IQ4_NL / IQ4_XS (names iq4_nl, iq4_xs; kq_gen_iq4_blocks): the
 * dequantized floats in kq-NAME.dequant.f32 and the vec_dot (x quantized to
 * the type's vec_dot_type, Q8_0 / Q8_K) in kq-vecdot.txt. (No quantizer
 * fixture: baton's IQ4 quantizer is its own, not ggml's.) */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ggml-cpu.h"
#include "ggml.h"
#include "kq_gen.h"

static const struct {
    uint32_t type;
    const char *name;
} kq_types[] = {{10, "q2_k"}, {11, "q3_k"}, {12, "q4_k"}, {13, "q5_k"}, {14, "q6_k"}};

int main(int argc, char **argv)
{
    static uint8_t blocks[KQ_GEN_NB * 210];
    static float y[KQ_GEN_K], x[KQ_GEN_K];
    static uint8_t xq[KQ_GEN_K * 2]; /* Q8_K: 292 bytes per 256 */
    char path[4096];
    FILE *vd;

    if (argc != 2) {
        fprintf(stderr, "usage: kq_ref OUTDIR\n");
        return 2;
    }
    ggml_cpu_init();
    if (sizeof(float) != 4 || ggml_type_size(GGML_TYPE_Q8_K) * KQ_GEN_NB > sizeof xq) {
        fprintf(stderr, "kq_ref: unexpected type sizes\n");
        return 1;
    }
    snprintf(path, sizeof path, "%s/kq-vecdot.txt", argv[1]);
    vd = fopen(path, "w");
    if (!vd) {
        perror(path);
        return 1;
    }
    for (size_t i = 0; i < sizeof kq_types / sizeof kq_types[0]; i++) {
        const enum ggml_type t = (enum ggml_type)kq_types[i].type;
        const struct ggml_type_traits *tr = ggml_get_type_traits(t);
        const struct ggml_type_traits_cpu *ct = ggml_get_type_traits_cpu(t);
        const struct ggml_type_traits_cpu *qt = ggml_get_type_traits_cpu(GGML_TYPE_Q8_K);
        FILE *f;

        if (tr->blck_size != 256 || tr->type_size != kq_gen_block_bytes(kq_types[i].type) ||
            ct->vec_dot_type != GGML_TYPE_Q8_K || !tr->to_float || !ct->vec_dot ||
            !qt->from_float) {
            fprintf(stderr, "kq_ref: ggml's %s is not the K-quant kq_gen.h describes\n",
                    kq_types[i].name);
            return 1;
        }
        kq_gen_blocks(kq_types[i].type, blocks, KQ_GEN_NB);
        tr->to_float(blocks, y, KQ_GEN_K);
        snprintf(path, sizeof path, "%s/kq-%s.dequant.f32", argv[1], kq_types[i].name);
        f = fopen(path, "wb");
        /* x86-64 and aarch64 hosts are little-endian: the floats as they lie */
        if (!f || fwrite(y, sizeof y, 1, f) != 1 || fclose(f) != 0) {
            perror(path);
            return 1;
        }
        for (uint32_t v = 0; v < KQ_GEN_NX; v++) {
            float s = 0.0f;

            kq_gen_x(v, x, KQ_GEN_K);
            qt->from_float(x, xq, KQ_GEN_K);
            ct->vec_dot(KQ_GEN_K, &s, 0, blocks, 0, xq, 0, 1);
            fprintf(vd, "%s %u %a\n", kq_types[i].name, v, (double)s);
        }
    }
    for (uint32_t t = 6; t <= 7; t++) {
        const char *name = t == 6 ? "q5_0" : "q5_1";
        const struct ggml_type_traits *tr = ggml_get_type_traits((enum ggml_type)t);
        const struct ggml_type_traits_cpu *ct = ggml_get_type_traits_cpu((enum ggml_type)t);
        const struct ggml_type_traits_cpu *qt = ggml_get_type_traits_cpu(ct->vec_dot_type);
        FILE *f;

        if (tr->blck_size != 32 || tr->type_size != kq_gen_q5_block_bytes(t) || !tr->to_float ||
            !tr->from_float_ref || !ct->vec_dot || !qt->from_float ||
            ggml_row_size(ct->vec_dot_type, KQ_GEN_K) > sizeof xq) {
            fprintf(stderr, "kq_ref: ggml's %s is not the type kq_gen.h describes\n", name);
            return 1;
        }
        kq_gen_q5_blocks(t, blocks);
        tr->to_float(blocks, y, KQ_GEN_K);
        snprintf(path, sizeof path, "%s/kq-%s.dequant.f32", argv[1], name);
        f = fopen(path, "wb");
        if (!f || fwrite(y, sizeof y, 1, f) != 1 || fclose(f) != 0) {
            perror(path);
            return 1;
        }
        for (uint32_t v = 0; v < KQ_GEN_NX; v++) {
            float s = 0.0f;

            kq_gen_x(v, x, KQ_GEN_K);
            qt->from_float(x, xq, KQ_GEN_K);
            ct->vec_dot(KQ_GEN_K, &s, 0, blocks, 0, xq, 0, 1);
            fprintf(vd, "%s %u %a\n", name, v, (double)s);
        }
        {
            static uint8_t qb[KQ_GEN_NB * 210];

            kq_gen_x(0, x, KQ_GEN_K);
            tr->from_float_ref(x, qb, KQ_GEN_K);
            snprintf(path, sizeof path, "%s/kq-%s.quant.bin", argv[1], name);
            f = fopen(path, "wb");
            if (!f || fwrite(qb, KQ_GEN_Q5_NB * kq_gen_q5_block_bytes(t), 1, f) != 1 ||
                fclose(f) != 0) {
                perror(path);
                return 1;
            }
        }
    }
    for (uint32_t t = 20; t <= 23; t += 3) {
        const char *name = t == 20 ? "iq4_nl" : "iq4_xs";
        const enum ggml_type want_vd = t == 20 ? GGML_TYPE_Q8_0 : GGML_TYPE_Q8_K;
        const struct ggml_type_traits *tr = ggml_get_type_traits((enum ggml_type)t);
        const struct ggml_type_traits_cpu *ct = ggml_get_type_traits_cpu((enum ggml_type)t);
        const struct ggml_type_traits_cpu *qt = ggml_get_type_traits_cpu(ct->vec_dot_type);
        FILE *f;

        if ((size_t)tr->blck_size * kq_gen_iq4_nb(t) != KQ_GEN_K ||
            tr->type_size != kq_gen_iq4_block_bytes(t) || !tr->to_float || !ct->vec_dot ||
            ct->vec_dot_type != want_vd || !qt->from_float ||
            kq_gen_iq4_nb(t) * kq_gen_iq4_block_bytes(t) > sizeof blocks ||
            ggml_row_size(ct->vec_dot_type, KQ_GEN_K) > sizeof xq) {
            fprintf(stderr, "kq_ref: ggml's %s is not the type kq_gen.h describes\n", name);
            return 1;
        }
        kq_gen_iq4_blocks(t, blocks);
        tr->to_float(blocks, y, KQ_GEN_K);
        snprintf(path, sizeof path, "%s/kq-%s.dequant.f32", argv[1], name);
        f = fopen(path, "wb");
        if (!f || fwrite(y, sizeof y, 1, f) != 1 || fclose(f) != 0) {
            perror(path);
            return 1;
        }
        for (uint32_t v = 0; v < KQ_GEN_NX; v++) {
            float s = 0.0f;

            kq_gen_x(v, x, KQ_GEN_K);
            qt->from_float(x, xq, KQ_GEN_K);
            ct->vec_dot(KQ_GEN_K, &s, 0, blocks, 0, xq, 0, 1);
            fprintf(vd, "%s %u %a\n", name, v, (double)s);
        }
    }
    if (fclose(vd) != 0) {
        perror("kq-vecdot.txt");
        return 1;
    }
    return 0;
}
