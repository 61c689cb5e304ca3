/* GGUF writer: files written by gguf_write.c read back exactly with the
 * reader, metadata copied raw round-trips byte for byte, and tensors
 * allocated by the writer or borrowed are written as copied ones are. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "baton/status.h"
#include "core/types.h"
#include "model/gguf.h"
#include "model/gguf_write.h"

static void tmp_path(char *buf, size_t n, const char *tag)
{
    snprintf(buf, n, "/tmp/baton_gw_%s_%ld.gguf", tag, (long)getpid());
}

static void round_trip(void **state)
{
    struct baton_gguf_writer *w;
    struct baton_gguf *g;
    struct baton_gguf_tensor t;
    char path[128], err[256] = "";
    const float fv[3] = {1.5f, -2.0f, 0.25f};
    const int32_t iv[2] = {-7, 9};
    const char *strs[2] = {"a", "\xe2\x96\x81hello"};
    const size_t lens[2] = {1, 8};
    float data[6] = {1, 2, 3, 4, 5, 6};
    int32_t ids[3] = {7, 8, 9};
    const uint64_t ne2[2] = {3, 2}, ne1[1] = {3};
    const char *s;
    size_t slen;
    uint32_t u;
    float f;
    int b;

    (void)state;
    tmp_path(path, sizeof(path), "rt");
    assert_int_equal(baton_gguf_writer_create(&w), 0);
    assert_int_equal(baton_gguf_w_u32(w, "k.u32", 123456), 0);
    assert_int_equal(baton_gguf_w_f32(w, "k.f32", 0.5f), 0);
    assert_int_equal(baton_gguf_w_bool(w, "k.bool", 1), 0);
    assert_int_equal(baton_gguf_w_string(w, "k.str", "llama", 5), 0);
    assert_int_equal(baton_gguf_w_f32_array(w, "k.fa", fv, 3), 0);
    assert_int_equal(baton_gguf_w_i32_array(w, "k.ia", iv, 2), 0);
    assert_int_equal(baton_gguf_w_str_array(w, "k.sa", strs, lens, 2), 0);
    assert_int_equal(baton_gguf_w_tensor(w, "m", BATON_TYPE_F32, 2, ne2, data, sizeof(data)), 0);
    assert_int_equal(baton_gguf_w_tensor(w, "v", BATON_TYPE_I32, 1, ne1, ids, sizeof(ids)), 0);
    /* a size that does not match the shape is refused */
    assert_int_equal(baton_gguf_w_tensor(w, "bad", BATON_TYPE_F32, 1, ne1, data, 8),
                     BATON_E_INVAL);
    assert_int_equal(baton_gguf_writer_write(w, path, err, sizeof(err)), 0);
    baton_gguf_writer_free(w);

    assert_int_equal(baton_gguf_open(path, &g, err, sizeof(err)), 0);
    assert_int_equal(baton_gguf_n_kv(g), 7);
    assert_int_equal(baton_gguf_get_u32(g, "k.u32", &u), 0);
    assert_int_equal(u, 123456);
    assert_int_equal(baton_gguf_get_f32(g, "k.f32", &f), 0);
    assert_true(f == 0.5f);
    assert_int_equal(baton_gguf_get_bool(g, "k.bool", &b), 0);
    assert_int_equal(b, 1);
    assert_int_equal(baton_gguf_get_string(g, "k.str", &s, &slen), 0);
    assert_int_equal(slen, 5);
    assert_memory_equal(s, "llama", 5);
    assert_int_equal(baton_gguf_arr_f32(baton_gguf_find_key(g, "k.fa"), 2, &f), 0);
    assert_true(f == 0.25f);
    assert_int_equal(baton_gguf_arr_string(baton_gguf_find_key(g, "k.sa"), 1, &s, &slen), 0);
    assert_int_equal(slen, 8);
    assert_memory_equal(s, strs[1], 8);
    assert_int_equal(baton_gguf_find_tensor(g, "m", &t, NULL), 0);
    assert_int_equal(t.type, BATON_TYPE_F32);
    assert_int_equal(t.ne[0], 3);
    assert_int_equal(t.ne[1], 2);
    assert_memory_equal(t.data, data, sizeof(data));
    assert_int_equal(t.offset, 0);
    assert_int_equal(baton_gguf_find_tensor(g, "v", &t, NULL), 0);
    assert_int_equal(t.offset, 32); /* 24 bytes padded to the 32-byte alignment */
    assert_memory_equal(t.data, ids, sizeof(ids));
    assert_int_equal(baton_gguf_data_offset(g) % 32, 0);

    /* raw copy of every pair into a second file gives identical metadata bytes */
    {
        struct baton_gguf_writer *w2;
        struct baton_gguf *g2;
        char path2[128];
        uint64_t i;

        tmp_path(path2, sizeof(path2), "raw");
        assert_int_equal(baton_gguf_writer_create(&w2), 0);
        for (i = 0; i < baton_gguf_n_kv(g); i++) {
            const struct baton_gguf_kv *kv = baton_gguf_kv_at(g, i);
            const void *raw;
            size_t len;

            assert_int_equal(baton_gguf_kv_raw(kv, &raw, &len), 0);
            assert_int_equal(baton_gguf_w_raw(w2, baton_gguf_kv_key(kv), baton_gguf_kv_type(kv),
                                              raw, len),
                             0);
        }
        assert_int_equal(baton_gguf_writer_write(w2, path2, err, sizeof(err)), 0);
        baton_gguf_writer_free(w2);
        assert_int_equal(baton_gguf_open(path2, &g2, err, sizeof(err)), 0);
        assert_int_equal(baton_gguf_n_kv(g2), 7);
        for (i = 0; i < baton_gguf_n_kv(g); i++) {
            const void *r1, *r2;
            size_t l1, l2;

            baton_gguf_kv_raw(baton_gguf_kv_at(g, i), &r1, &l1);
            baton_gguf_kv_raw(baton_gguf_kv_at(g2, i), &r2, &l2);
            assert_int_equal(l1, l2);
            assert_memory_equal(r1, r2, l1);
        }
        baton_gguf_close(g2);
        unlink(path2);
    }
    baton_gguf_close(g);
    unlink(path);
}

/* Reads the whole file at path into a new buffer; its length in *len. */
static uint8_t *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    uint8_t *buf = NULL;
    long n;

    assert_non_null(f);
    assert_int_equal(fseek(f, 0, SEEK_END), 0);
    n = ftell(f);
    assert_true(n > 0);
    rewind(f);
    buf = malloc((size_t)n);
    assert_non_null(buf);
    assert_int_equal(fread(buf, 1, (size_t)n, f), (size_t)n);
    fclose(f);
    *len = (size_t)n;
    return buf;
}

/* A tensor added by baton_gguf_w_tensor_alloc (filled after the call) or
 * by baton_gguf_w_tensor_ref (borrowed, not copied) is written as the same
 * bytes as one copied in by baton_gguf_w_tensor; a size that does not
 * match the shape is refused by each. */
static void alloc_and_ref_write_the_same_bytes(void **state)
{
    const float m[6] = {1, -2, 3.5f, 4, 5, -6.25f};
    const int32_t v[3] = {7, 8, 9};
    const uint64_t ne2[2] = {3, 2}, ne1[1] = {3};
    char path[2][128], err[256] = "";
    uint8_t *file[2];
    size_t len[2];
    int k;

    (void)state;
    for (k = 0; k < 2; k++) {
        struct baton_gguf_writer *w;
        float borrowed[6];
        void *dst = NULL;

        tmp_path(path[k], sizeof(path[k]), k == 0 ? "copy" : "alloc");
        assert_int_equal(baton_gguf_writer_create(&w), 0);
        assert_int_equal(baton_gguf_w_u32(w, "k.u32", 5), 0);
        if (k == 0) {
            assert_int_equal(baton_gguf_w_tensor(w, "m", BATON_TYPE_F32, 2, ne2, m, sizeof m), 0);
            assert_int_equal(baton_gguf_w_tensor(w, "v", BATON_TYPE_I32, 1, ne1, v, sizeof v), 0);
        } else {
            assert_int_equal(baton_gguf_w_tensor_alloc(w, "bad", BATON_TYPE_F32, 2, ne2, 20,
                                                       &dst),
                             BATON_E_INVAL);
            assert_int_equal(baton_gguf_w_tensor_ref(w, "bad", BATON_TYPE_F32, 2, ne2, m, 20),
                             BATON_E_INVAL);
            assert_int_equal(baton_gguf_w_tensor_alloc(w, "m", BATON_TYPE_F32, 2, ne2, sizeof m,
                                                       &dst),
                             0);
            assert_non_null(dst);
            memcpy(dst, m, sizeof m);
            /* borrowed: what the buffer holds when the file is written */
            memset(borrowed, 0, sizeof borrowed);
            assert_int_equal(baton_gguf_w_tensor_ref(w, "v", BATON_TYPE_I32, 1, ne1, borrowed,
                                                     sizeof v),
                             0);
            memcpy(borrowed, v, sizeof v);
        }
        assert_int_equal(baton_gguf_writer_write(w, path[k], err, sizeof(err)), 0);
        baton_gguf_writer_free(w); /* frees the allocated data, not the borrowed */
        file[k] = slurp(path[k], &len[k]);
        unlink(path[k]);
    }
    assert_int_equal(len[0], len[1]);
    assert_memory_equal(file[0], file[1], len[0]);
    free(file[0]);
    free(file[1]);
}

static void write_error_names_path(void **state)
{
    struct baton_gguf_writer *w;
    char err[256] = "";

    (void)state;
    assert_int_equal(baton_gguf_writer_create(&w), 0);
    assert_int_equal(baton_gguf_writer_write(w, "/nonexistent-dir/x.gguf", err, sizeof(err)),
                     BATON_E_IO);
    assert_non_null(strstr(err, "/nonexistent-dir/x.gguf"));
    baton_gguf_writer_free(w);
}

/* The write renames its file over path: a FIFO (or device) at path is
 * refused and left as it was, and no temporary file stays behind. */
static void write_refuses_non_regular(void **state)
{
    struct baton_gguf_writer *w;
    char dir[] = "/tmp/gguf_write_fifo.XXXXXX", path[64], err[256] = "";
    struct stat st;

    (void)state;
    assert_non_null(mkdtemp(dir));
    snprintf(path, sizeof(path), "%s/out", dir);
    assert_int_equal(mkfifo(path, 0600), 0);
    assert_int_equal(baton_gguf_writer_create(&w), 0);
    assert_int_equal(baton_gguf_writer_write(w, path, err, sizeof(err)), BATON_E_IO);
    assert_non_null(strstr(err, "not a regular file"));
    assert_int_equal(lstat(path, &st), 0);
    assert_true(S_ISFIFO(st.st_mode));
    baton_gguf_writer_free(w);
    assert_int_equal(unlink(path), 0);
    assert_int_equal(rmdir(dir), 0); /* empty: the temporary file is gone */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(round_trip),
        cmocka_unit_test(alloc_and_ref_write_the_same_bytes),
        cmocka_unit_test(write_error_names_path),
        cmocka_unit_test(write_refuses_non_regular),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
