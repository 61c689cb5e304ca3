/* GGUF reader: the real stories260K file (values from its SOURCES.md and an
 * independent Python dump), truncated copies at every header length,
 * corrupted fields patched into an in-memory copy, and small files written
 * by the writer below (which shares no code with the reader). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "baton/status.h"
#include "model/gguf.h"

#define MODEL_FILE "stories260K.gguf"
#define MODEL_BYTES 1185376u
#define MODEL_DATA_OFFSET 14176u
#define MODEL_INFO_END 14152u /* end of the last tensor info (then 24 bytes of padding) */

/* ---- the real model ---- */

static char model_path[4096];
static uint8_t *model;
static size_t model_len;

/* Loads the model once into memory; skips (or fails under CI=true) if absent. */
static void need_model(void)
{
    if (model != NULL)
        return;
    const char *dir = getenv("MODEL_DIR");
    const char *ci = getenv("CI");
    int in_ci = ci != NULL && strcmp(ci, "true") == 0;
    FILE *f = NULL;
    if (dir != NULL) {
        snprintf(model_path, sizeof model_path, "%s/%s", dir, MODEL_FILE);
        f = fopen(model_path, "rb");
    }
    if (f == NULL) {
        if (in_ci)
            fail_msg("model %s/%s not found (MODEL_DIR) and CI=true", dir ? dir : "(unset)",
                     MODEL_FILE);
        print_message("skipping: model %s/%s not found (set MODEL_DIR)\n", dir ? dir : "(unset)",
                      MODEL_FILE);
        skip();
    }
    model = malloc(MODEL_BYTES);
    assert_non_null(model);
    model_len = fread(model, 1, MODEL_BYTES, f);
    assert_int_equal(fgetc(f), EOF);
    fclose(f);
    assert_int_equal(model_len, MODEL_BYTES);
}

/* A malloc'd copy of the model's first len bytes (exact size, so ASan sees
 * any read past it). */
static uint8_t *copy_prefix(size_t len)
{
    uint8_t *p = malloc(len ? len : 1);
    assert_non_null(p);
    memcpy(p, model, len);
    return p;
}

static void put_le(uint8_t *p, uint64_t v, unsigned n)
{
    for (unsigned i = 0; i < n; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

/* Offset of the first occurrence of s in the model's header, or fails. */
static size_t find_in_header(const char *s)
{
    void *p = memmem(model, MODEL_DATA_OFFSET, s, strlen(s));
    assert_non_null(p);
    return (size_t)((uint8_t *)p - model);
}

/* Opens buf as "model.gguf"; returns the status, err holds the message. */
static int open_buf(const uint8_t *buf, size_t len, char *err, size_t err_len)
{
    struct baton_gguf *g = (struct baton_gguf *)0x1;
    int st = baton_gguf_open_buffer(buf, len, "model.gguf", &g, err, err_len);
    if (st == 0) {
        assert_non_null(g);
        baton_gguf_close(g);
    } else {
        assert_null(g);
        assert_true(strncmp(err, "model.gguf: ", 12) == 0);
    }
    return st;
}

/* Patches n little-endian bytes of v at off in a copy of the model, opens
 * it, and checks the status and that err contains want. */
static void expect_patch(size_t off, uint64_t v, unsigned n, int want_st, const char *want)
{
    uint8_t *p = copy_prefix(model_len);
    char err[512] = "";
    put_le(p + off, v, n);
    int st = open_buf(p, model_len, err, sizeof err);
    if (st != want_st || (want != NULL && strstr(err, want) == NULL))
        fail_msg("patch @%zu = %llu: got %d '%s', want %d '%s'", off, (unsigned long long)v, st,
                 err, want_st, want ? want : "");
    free(p);
}

static void check_model(const struct baton_gguf *g)
{
    struct baton_gguf_tensor t;
    uint64_t idx = 99;
    uint32_t u = 0;
    float f = 0;
    const char *s;
    size_t len;

    assert_int_equal(baton_gguf_version(g), 3);
    assert_int_equal(baton_gguf_n_kv(g), 19);
    assert_int_equal(baton_gguf_n_tensors(g), 48);
    assert_int_equal(baton_gguf_alignment(g), 32);
    assert_int_equal(baton_gguf_data_offset(g), MODEL_DATA_OFFSET);
    assert_int_equal(baton_gguf_file_size(g), MODEL_BYTES);

    assert_int_equal(baton_gguf_find_tensor(g, "token_embd.weight", &t, &idx), 0);
    assert_int_equal(idx, 0);
    assert_string_equal(t.name, "token_embd.weight");
    assert_int_equal(t.type, BATON_TYPE_F32);
    assert_int_equal(t.n_dims, 2);
    assert_int_equal(t.ne[0], 64);
    assert_int_equal(t.ne[1], 512);
    assert_int_equal(t.ne[2], 1);
    assert_int_equal(t.ne[3], 1);
    assert_int_equal(t.offset, 0);
    assert_int_equal(t.file_offset, MODEL_DATA_OFFSET);
    assert_int_equal(t.nbytes, 131072);
    assert_ptr_equal(t.data, (const uint8_t *)baton_gguf_base(g) + MODEL_DATA_OFFSET);
    assert_memory_equal(t.data, model + MODEL_DATA_OFFSET, 131072);

    /* output.weight is a byte-identical copy of token_embd (SOURCES.md). */
    struct baton_gguf_tensor out;
    assert_int_equal(baton_gguf_find_tensor(g, "output.weight", &out, &idx), 0);
    assert_int_equal(idx, 2);
    assert_int_equal(out.offset, 131328);
    assert_memory_equal(out.data, t.data, 131072);

    assert_int_equal(baton_gguf_find_tensor(g, "blk.0.ffn_down.weight", &t, &idx), 0);
    assert_int_equal(idx, 9);
    assert_int_equal(t.ne[0], 172);
    assert_int_equal(t.ne[1], 64);
    assert_int_equal(t.offset, 355840);
    assert_int_equal(t.nbytes, 44032);
    assert_int_equal(baton_gguf_find_tensor(g, "output_norm.weight", &t, NULL), 0);
    assert_int_equal(t.n_dims, 1);
    assert_int_equal(t.ne[0], 64);
    assert_int_equal(t.ne[1], 1);
    assert_int_equal(t.nbytes, 256);
    assert_int_equal(baton_gguf_find_tensor(g, "blk.5.attn_q.weight", &t, NULL), BATON_E_NOT_FOUND);
    assert_int_equal(baton_gguf_find_tensor(g, "", &t, NULL), BATON_E_NOT_FOUND);

    /* Tensors are packed back to back and the last one ends the file. */
    uint64_t total = 0;
    for (uint64_t i = 0; i < 48; i++) {
        assert_int_equal(baton_gguf_tensor_at(g, i, &t), 0);
        assert_int_equal(t.offset, total);
        assert_int_equal(t.type, BATON_TYPE_F32);
        total += t.nbytes;
    }
    assert_string_equal(t.name, "blk.4.ffn_norm.weight");
    assert_int_equal(total, MODEL_BYTES - MODEL_DATA_OFFSET);
    assert_int_equal(baton_gguf_tensor_at(g, 48, &t), BATON_E_BOUNDS);

    /* Metadata. */
    assert_string_equal(baton_gguf_kv_key(baton_gguf_kv_at(g, 0)), "tokenizer.ggml.tokens");
    assert_string_equal(baton_gguf_kv_key(baton_gguf_kv_at(g, 18)),
                        "llama.attention.layer_norm_rms_epsilon");
    assert_null(baton_gguf_kv_at(g, 19));
    assert_int_equal(baton_gguf_get_string(g, "general.architecture", &s, &len), 0);
    assert_int_equal(len, 5);
    assert_memory_equal(s, "llama", 5);
    static const struct {
        const char *key;
        uint32_t v;
    } u32s[] = {
        {"llama.embedding_length", 64},
        {"llama.block_count", 5},
        {"llama.attention.head_count", 8},
        {"llama.attention.head_count_kv", 4},
        {"llama.feed_forward_length", 172},
        {"llama.rope.dimension_count", 8},
        {"llama.context_length", 2048},
        {"tokenizer.ggml.bos_token_id", 1},
        {"tokenizer.ggml.eos_token_id", 2},
        {"tokenizer.ggml.unknown_token_id", 0},
        {"tokenizer.ggml.padding_token_id", UINT32_MAX},
    };
    for (size_t i = 0; i < sizeof u32s / sizeof u32s[0]; i++) {
        u = 12345;
        assert_int_equal(baton_gguf_get_u32(g, u32s[i].key, &u), 0);
        assert_int_equal(u, u32s[i].v);
    }
    assert_int_equal(baton_gguf_get_f32(g, "llama.attention.layer_norm_rms_epsilon", &f), 0);
    assert_true(f == 1e-5f);
    u = 7;
    assert_int_equal(baton_gguf_get_u32(g, "llama.rope.freq_base", &u), BATON_E_NOT_FOUND);
    assert_int_equal(u, 7);
    assert_int_equal(baton_gguf_get_f32(g, "llama.block_count", &f), BATON_E_TYPE);
    assert_int_equal(baton_gguf_get_string(g, "llama.block_count", &s, &len), BATON_E_TYPE);
    assert_int_equal(baton_gguf_get_u32(g, "general.name", &u), BATON_E_TYPE);
    assert_null(baton_gguf_find_key(g, "general"));
    assert_null(baton_gguf_find_key(g, "general.architecturex"));

    const struct baton_gguf_kv *tokens = baton_gguf_find_key(g, "tokenizer.ggml.tokens");
    const struct baton_gguf_kv *scores = baton_gguf_find_key(g, "tokenizer.ggml.scores");
    const struct baton_gguf_kv *types = baton_gguf_find_key(g, "tokenizer.ggml.token_type");
    uint32_t et;
    uint64_t count;
    assert_non_null(tokens);
    assert_int_equal(baton_gguf_kv_type(tokens), BATON_GGUF_ARRAY);
    assert_int_equal(baton_gguf_kv_array(tokens, &et, &count), 0);
    assert_int_equal(et, BATON_GGUF_STRING);
    assert_int_equal(count, 512);
    assert_int_equal(baton_gguf_arr_string(tokens, 0, &s, &len), 0);
    assert_int_equal(len, 5);
    assert_memory_equal(s, "<unk>", 5);
    assert_int_equal(baton_gguf_arr_string(tokens, 3, &s, &len), 0);
    assert_int_equal(len, 6);
    assert_memory_equal(s, "<0x00>", 6);
    assert_int_equal(baton_gguf_arr_string(tokens, 403, &s, &len), 0);
    assert_int_equal(len, 7);
    assert_memory_equal(s, "\xe2\x96\x81Once", 7);
    assert_int_equal(baton_gguf_arr_string(tokens, 512, &s, &len), BATON_E_BOUNDS);
    assert_int_equal(baton_gguf_arr_f32(tokens, 0, &f), BATON_E_TYPE);
    assert_int_equal(baton_gguf_kv_array(scores, &et, &count), 0);
    assert_int_equal(et, BATON_GGUF_F32);
    assert_int_equal(count, 512);
    assert_int_equal(baton_gguf_arr_f32(scores, 260, &f), 0);
    assert_true(f == -1.0f);
    assert_int_equal(baton_gguf_arr_f32(scores, 511, &f), 0);
    assert_true(f == -252.0f);
    int32_t ty = 0;
    assert_int_equal(baton_gguf_arr_i32(types, 0, &ty), 0);
    assert_int_equal(ty, 2);
    assert_int_equal(baton_gguf_arr_i32(types, 1, &ty), 0);
    assert_int_equal(ty, 3);
    assert_int_equal(baton_gguf_arr_i32(types, 258, &ty), 0);
    assert_int_equal(ty, 6);
    assert_int_equal(baton_gguf_arr_i32(types, 259, &ty), 0);
    assert_int_equal(ty, 1);
    assert_int_equal(baton_gguf_arr_i32(types, 512, &ty), BATON_E_BOUNDS);
    assert_int_equal(baton_gguf_arr_string(types, 0, &s, &len), BATON_E_TYPE);
    struct baton_gguf_scalar sc;
    assert_int_equal(baton_gguf_kv_scalar(tokens, &sc), BATON_E_TYPE);
    assert_int_equal(baton_gguf_kv_scalar(baton_gguf_find_key(g, "general.name"), &sc), 0);
    assert_int_equal(sc.type, BATON_GGUF_STRING);
    assert_int_equal(sc.v.str.len, 5);
}

static void test_real_file(void **state)
{
    (void)state;
    need_model();
    struct baton_gguf *g = NULL;
    char err[256] = "x";
    assert_int_equal(baton_gguf_open(model_path, &g, err, sizeof err), 0);
    assert_string_equal(err, "");
    check_model(g);
    baton_gguf_close(g);

    /* The same bytes in a caller's buffer read the same. */
    assert_int_equal(baton_gguf_open_buffer(model, model_len, NULL, &g, err, sizeof err), 0);
    check_model(g);
    baton_gguf_close(g);
    baton_gguf_close(NULL);
}

static void test_open_errors(void **state)
{
    (void)state;
    struct baton_gguf *g = (struct baton_gguf *)0x1;
    char err[512];
    assert_int_equal(baton_gguf_open("/nonexistent/x.gguf", &g, err, sizeof err), BATON_E_IO);
    assert_null(g);
    assert_non_null(strstr(err, "/nonexistent/x.gguf: cannot open"));
    assert_int_equal(baton_gguf_open("/", &g, err, sizeof err), BATON_E_IO);
    assert_non_null(strstr(err, "/: not a regular file"));

    char path[] = "/tmp/baton_gguf_test_XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, "GGUF\3\0\0\0", 8), 8);
    close(fd);
    assert_int_equal(baton_gguf_open(path, &g, err, sizeof err), BATON_E_TRUNCATED);
    assert_non_null(strstr(err, "shorter than the 24-byte header: not a GGUF file, or a "
                               "truncated one"));
    fd = open(path, O_WRONLY | O_TRUNC);
    assert_true(fd >= 0);
    close(fd);
    assert_int_equal(baton_gguf_open(path, &g, err, sizeof err), BATON_E_TRUNCATED);
    unlink(path);

    /* A message that does not fit is cut, not overrun; no buffer is fine. */
    char tiny[8];
    memset(tiny, 'z', sizeof tiny);
    assert_int_equal(baton_gguf_open("/nonexistent/x.gguf", &g, tiny, 5), BATON_E_IO);
    assert_int_equal(tiny[4], '\0');
    assert_int_equal(tiny[5], 'z');
    assert_int_equal(baton_gguf_open("/nonexistent/x.gguf", &g, NULL, 0), BATON_E_IO);
    assert_int_equal(baton_gguf_open_buffer(NULL, 0, NULL, &g, err, sizeof err), BATON_E_TRUNCATED);
    assert_non_null(strstr(err, "<memory>: "));
}

static void test_truncated(void **state)
{
    (void)state;
    need_model();
    char err[512];
    /* Every length up to the end of the padding, then lengths inside the data. */
    for (size_t len = 0; len <= MODEL_DATA_OFFSET + 8; len++) {
        uint8_t *p = copy_prefix(len);
        int st = open_buf(p, len, err, sizeof err);
        free(p);
        if (st >= 0)
            fail_msg("truncated at %zu: accepted", len);
        if (len < 24 || (len >= MODEL_INFO_END && len < MODEL_DATA_OFFSET))
            assert_int_equal(st, BATON_E_TRUNCATED);
        if (len >= MODEL_DATA_OFFSET) {
            assert_int_equal(st, BATON_E_BOUNDS);
            assert_non_null(strstr(err, "data past end of file"));
        }
    }
    const size_t inside[] = {MODEL_DATA_OFFSET + 131071, MODEL_DATA_OFFSET + 131072, 600000,
                             MODEL_BYTES - 256, MODEL_BYTES - 1};
    for (size_t i = 0; i < sizeof inside / sizeof inside[0]; i++) {
        uint8_t *p = copy_prefix(inside[i]);
        assert_int_equal(open_buf(p, inside[i], err, sizeof err), BATON_E_BOUNDS);
        free(p);
    }
    /* Cut inside the last tensor: the message names it. */
    uint8_t *p = copy_prefix(MODEL_BYTES - 1);
    open_buf(p, MODEL_BYTES - 1, err, sizeof err);
    free(p);
    assert_non_null(
        strstr(err, "model.gguf: tensor 47 'blk.4.ffn_norm.weight': data past end of file"));
    p = copy_prefix(MODEL_BYTES);
    assert_int_equal(open_buf(p, MODEL_BYTES, err, sizeof err), 0);
    free(p);
}

static void test_corrupt_header(void **state)
{
    (void)state;
    need_model();
    expect_patch(0, 'X', 1, BATON_E_FORMAT, "model.gguf: bad magic");
    expect_patch(4, 1, 4, BATON_E_FORMAT, "unsupported GGUF version 1");
    expect_patch(4, 4, 4, BATON_E_FORMAT, "unsupported GGUF version 4");
    expect_patch(4, 0x03000000, 4, BATON_E_FORMAT, "big-endian");
    expect_patch(4, 2, 4, 0, NULL); /* v2 has the same layout */
    expect_patch(8, 1ull << 40, 8, BATON_E_LIMIT, "tensor count 1099511627776 over limit");
    expect_patch(16, 1ull << 40, 8, BATON_E_LIMIT, "key count 1099511627776 over limit");
    expect_patch(16, UINT64_MAX, 8, BATON_E_LIMIT, "key count");
    /* One pair more than written: tensor 0's info is read as key 19 (name
     * "token_embd.weight", type = n_dims 2 = u16, value = 2 bytes of ne[0]);
     * the next u64 length is ne[0]'s other 6 bytes (0) and 2 bytes of
     * ne[1] = 512, i.e. 2 << 56. */
    expect_patch(16, 20, 8, BATON_E_LIMIT,
                 "model.gguf: tensor 0: name length 144115188075855872 over limit 255");
    expect_patch(16, BATON_GGUF_MAX_KV, 8, BATON_E_LIMIT,
                 "model.gguf: key 20: key length 144115188075855872 over limit 1024");
    /* One tensor more: the zero padding is read as an info with an empty name. */
    expect_patch(8, 49, 8, BATON_E_FORMAT, "tensor 48: empty name");
    /* Fewer tensors: the data section then starts earlier and every offset
     * still fits, so the file is valid (if meaningless): not detectable. */
    expect_patch(8, 47, 8, 0, NULL);
    expect_patch(8, 0, 8, 0, NULL);
}

static void test_corrupt_metadata(void **state)
{
    (void)state;
    need_model();
    /* Pair 0: u64 key length @24, key @32 (21 bytes), type @53, element
     * type @57, count @61, first element's length @69. */
    expect_patch(24, 1ull << 62, 8, BATON_E_LIMIT,
                 "model.gguf: key 0: key length 4611686018427387904 over limit");
    expect_patch(24, BATON_GGUF_MAX_KEY_BYTES + 1, 8, BATON_E_LIMIT, "key length 1025 over limit");
    expect_patch(24, 0, 8, BATON_E_FORMAT, "key 0: empty key");
    expect_patch(32 + 5, 0, 1, BATON_E_FORMAT, "key 0: key contains a NUL byte");
    expect_patch(53, 13, 4, BATON_E_FORMAT, "key 'tokenizer.ggml.tokens': unknown value type 13");
    expect_patch(53, 0xffffffffu, 4, BATON_E_FORMAT, "unknown value type 4294967295");
    expect_patch(57, BATON_GGUF_ARRAY, 4, BATON_E_FORMAT,
                 "key 'tokenizer.ggml.tokens': nested arrays");
    expect_patch(57, 13, 4, BATON_E_FORMAT, "unknown array element type 13");
    expect_patch(61, 1ull << 40, 8, BATON_E_LIMIT, "array count 1099511627776 over limit");
    expect_patch(61, BATON_GGUF_MAX_ARRAY_ELEMS, 8, BATON_E_TRUNCATED,
                 "array of 16777216 strings runs past end");
    expect_patch(
        69, 1ull << 62, 8, BATON_E_LIMIT,
        "key 'tokenizer.ggml.tokens': element 0: string length 4611686018427387904 over limit");
    expect_patch(69, UINT64_MAX, 8, BATON_E_LIMIT, "element 0: string length");

    /* Scores: f32 array of 512 after its key. */
    size_t sk = find_in_header("tokenizer.ggml.scores");
    expect_patch(sk + 21 + 4 + 4, 1u << 23, 8, BATON_E_TRUNCATED,
                 "key 'tokenizer.ggml.scores': array of 8388608 f32 runs past end of file");
    /* token_type as a bool array: its first element (type 2) is not 0 or 1. */
    size_t tk = find_in_header("tokenizer.ggml.token_type");
    expect_patch(tk + 25 + 4, BATON_GGUF_BOOL, 4, BATON_E_FORMAT,
                 "key 'tokenizer.ggml.token_type': element 0: bool value 2 is not 0 or 1");

    /* A key renamed to an existing one of the same length. */
    size_t ak = find_in_header("general.architecture");
    uint8_t *p = copy_prefix(model_len);
    char err[512];
    memcpy(p + ak, "llama.context_length", 20);
    assert_int_equal(open_buf(p, model_len, err, sizeof err), BATON_E_FORMAT);
    assert_string_equal(err, "model.gguf: duplicate key 'llama.context_length'");

    /* A string value (general.name) whose length runs past the end of a
     * header-only copy. */
    size_t nk = find_in_header("general.name");
    memcpy(p, model, model_len);
    put_le(p + nk + 12 + 4, 20000, 8);
    assert_int_equal(open_buf(p, MODEL_DATA_OFFSET, err, sizeof err), BATON_E_TRUNCATED);
    assert_non_null(strstr(err, "key 'general.name': string of 20000 bytes runs past end of file"));
    free(p);
}

static void test_corrupt_tensor(void **state)
{
    (void)state;
    need_model();
    /* Tensor 3 'blk.0.attn_q.weight': name @q, n_dims @q+19, ne @q+23,
     * @q+31, type @q+39, offset @q+43 (= 262400). */
    const size_t q = find_in_header("blk.0.attn_q.weight");
    const uint64_t data_bytes = MODEL_BYTES - MODEL_DATA_OFFSET;
    expect_patch(q + 43, MODEL_BYTES, 8, BATON_E_BOUNDS,
                 "model.gguf: tensor 3 'blk.0.attn_q.weight': data past end of file");
    /* at the end of the file, over the last two tensors (tensor 46 is the
     * neighbour that shows it); ending exactly at EOF is tested in
     * test_overlaps */
    expect_patch(q + 43, data_bytes - 16384, 8, BATON_E_FORMAT,
                 "model.gguf: tensor 46 'blk.4.ffn_up.weight': data (offset 1126912, 44032 "
                 "bytes) overlaps that of tensor 3 'blk.0.attn_q.weight' (offset 1154816, "
                 "16384 bytes)");
    expect_patch(q + 43, data_bytes - 16384 + 32, 8, BATON_E_BOUNDS, "data past end of file");
    expect_patch(q + 43, UINT64_MAX - 31, 8, BATON_E_BOUNDS, "data past end of file"); /* no wrap */
    expect_patch(
        q + 43, 262400 + 4, 8, BATON_E_FORMAT,
        "tensor 3 'blk.0.attn_q.weight': data offset 262404 is not a multiple of the alignment 32");
    expect_patch(q + 19, 5, 4, BATON_E_FORMAT, "tensor 3 'blk.0.attn_q.weight': n_dims 5 over 4");
    expect_patch(q + 19, 0xffffffffu, 4, BATON_E_FORMAT, "n_dims 4294967295");
    expect_patch(q + 39, 99, 4, BATON_E_TYPE,
                 "tensor 3 'blk.0.attn_q.weight': unknown tensor type 99");
    expect_patch(q + 39, 4, 4, BATON_E_TYPE, "unknown tensor type 4"); /* retired Q4_2 */
    expect_patch(q + 39, BATON_TYPE_Q4_0, 4, 0, NULL);                 /* 64 is a multiple of 32 */
    expect_patch(q + 39, BATON_TYPE_Q5_0, 4, 0, NULL);
    expect_patch(q + 39, BATON_TYPE_Q5_1, 4, 0, NULL);
    expect_patch(q + 39, BATON_TYPE_IQ4_NL, 4, 0, NULL);
    expect_patch(q + 39, BATON_TYPE_IQ4_XS, 4, BATON_E_SHAPE,
                 "tensor 3 'blk.0.attn_q.weight': ne[0] 64 is not a multiple of the iq4_xs "
                 "block size 256");
    expect_patch(q + 39, 3, 4, BATON_E_TYPE,
                 "tensor 3 'blk.0.attn_q.weight': tensor type 3 (ggml's q4_1) is not one baton "
                 "runs (f32, f16, bf16, q8_0, q4_0, q5_0, q5_1, q2_k..q6_k, iq4_nl, iq4_xs)");
    expect_patch(q + 31, 1ull << 63, 8, BATON_E_FORMAT, "ne[1] is negative");
    expect_patch(q + 31, 1ull << 62, 8, BATON_E_OVERFLOW, "element count overflows");
    expect_patch(q + 31, 1ull << 40, 8, BATON_E_BOUNDS, "data past end of file");
    expect_patch(q + 23, 0, 8, 0, NULL); /* an empty tensor is valid */
    expect_patch(q - 8, 0, 8, BATON_E_FORMAT, "tensor 3: empty name");
    expect_patch(q - 8, 256, 8, BATON_E_LIMIT, "tensor 3: name length 256 over limit");
    expect_patch(q - 8, 1ull << 62, 8, BATON_E_LIMIT, "name length");

    /* Tensor 4 'blk.0.attn_k.weight' (8192 bytes @ 278784) moved onto
     * tensor 3 (16384 bytes @ 262400), at its start and inside it. */
    const size_t k4 = find_in_header("blk.0.attn_k.weight");
    expect_patch(k4 + 43, 262400, 8, BATON_E_FORMAT,
                 "model.gguf: tensor 4 'blk.0.attn_k.weight': data (offset 262400, 8192 bytes) "
                 "overlaps that of tensor 3 'blk.0.attn_q.weight' (offset 262400, 16384 bytes)");
    expect_patch(k4 + 43, 262400 + 8192, 8, BATON_E_FORMAT,
                 "tensor 4 'blk.0.attn_k.weight': data (offset 270592, 8192 bytes) overlaps "
                 "that of tensor 3");
    expect_patch(k4 + 43, 262400 + 16384 - 32, 8, BATON_E_FORMAT, "overlaps");
    expect_patch(k4 + 43, 262400 + 16384, 8, 0, NULL); /* where it is */

    /* ffn_down has ne[0] = 172: not a multiple of Q4_0's 32. */
    const size_t d = find_in_header("blk.0.ffn_down.weight");
    expect_patch(
        d + 21 + 4 + 16, BATON_TYPE_Q4_0, 4, BATON_E_SHAPE,
        "tensor 9 'blk.0.ffn_down.weight': ne[0] 172 is not a multiple of the q4_0 block size 32");
    expect_patch(
        d + 21 + 4 + 16, BATON_TYPE_Q5_0, 4, BATON_E_SHAPE,
        "model.gguf: tensor 9 'blk.0.ffn_down.weight': ne[0] 172 is not a multiple of the q5_0 "
        "block size 32");
    expect_patch(
        d + 21 + 4 + 16, BATON_TYPE_Q5_1, 4, BATON_E_SHAPE,
        "tensor 9 'blk.0.ffn_down.weight': ne[0] 172 is not a multiple of the q5_1 block size 32");

    /* attn_k renamed to attn_q. */
    const size_t k = find_in_header("blk.0.attn_k.weight");
    uint8_t *p = copy_prefix(model_len);
    char err[512];
    p[k + 11] = 'q';
    assert_int_equal(open_buf(p, model_len, err, sizeof err), BATON_E_FORMAT);
    assert_string_equal(err, "model.gguf: duplicate tensor name 'blk.0.attn_q.weight'");
    free(p);
}

/* ---- a minimal GGUF writer ---- */

struct gw {
    uint8_t buf[4096];
    size_t len;
};

static void gw_le(struct gw *w, uint64_t v, unsigned n)
{
    assert_true(n <= sizeof w->buf - w->len);
    put_le(w->buf + w->len, v, n);
    w->len += n;
}

static void gw_str(struct gw *w, const char *s)
{
    size_t n = strlen(s);
    gw_le(w, n, 8);
    assert_true(n <= sizeof w->buf - w->len);
    memcpy(w->buf + w->len, s, n);
    w->len += n;
}

static void gw_key(struct gw *w, const char *key, uint32_t type)
{
    gw_str(w, key);
    gw_le(w, type, 4);
}

static void gw_header(struct gw *w, uint32_t version, uint64_t n_tensors, uint64_t n_kv)
{
    w->len = 0;
    gw_le(w, 0x46554747u, 4);
    gw_le(w, version, 4);
    gw_le(w, n_tensors, 8);
    gw_le(w, n_kv, 8);
}

static void gw_pad(struct gw *w, size_t align)
{
    while (w->len % align != 0)
        gw_le(w, 0, 1);
}

static int gw_open(struct gw *w, struct baton_gguf **g, char *err, size_t err_len)
{
    return baton_gguf_open_buffer(w->buf, w->len, "syn.gguf", g, err, err_len);
}

/* Every value type, general.alignment 64 and two tensors. */
static void test_all_types(void **state)
{
    (void)state;
    struct gw w;
    struct baton_gguf *g = NULL;
    char err[512];
    gw_header(&w, 3, 2, 15);
    gw_key(&w, "u8", BATON_GGUF_U8), gw_le(&w, 200, 1);
    gw_key(&w, "i8", BATON_GGUF_I8), gw_le(&w, (uint8_t)-5, 1);
    gw_key(&w, "u16", BATON_GGUF_U16), gw_le(&w, 60000, 2);
    gw_key(&w, "i16", BATON_GGUF_I16), gw_le(&w, (uint16_t)-300, 2);
    gw_key(&w, "u32", BATON_GGUF_U32), gw_le(&w, 4000000000u, 4);
    gw_key(&w, "i32", BATON_GGUF_I32), gw_le(&w, (uint32_t)-70000, 4);
    gw_key(&w, "f32", BATON_GGUF_F32), gw_le(&w, 0x3fc00000u, 4); /* 1.5f */
    gw_key(&w, "bool", BATON_GGUF_BOOL), gw_le(&w, 1, 1);
    gw_key(&w, "str", BATON_GGUF_STRING), gw_str(&w, "hi");
    gw_key(&w, "arr", BATON_GGUF_ARRAY), gw_le(&w, BATON_GGUF_I32, 4), gw_le(&w, 3, 8);
    gw_le(&w, 1, 4), gw_le(&w, (uint32_t)-2, 4), gw_le(&w, 3, 4);
    gw_key(&w, "u64", BATON_GGUF_U64), gw_le(&w, 1ull << 40, 8);
    gw_key(&w, "i64", BATON_GGUF_I64), gw_le(&w, (uint64_t) - (int64_t)(1ull << 40), 8);
    gw_key(&w, "f64", BATON_GGUF_F64), gw_le(&w, 0x3fb999999999999aull, 8); /* 0.1 */
    gw_key(&w, "general.alignment", BATON_GGUF_U32), gw_le(&w, 64, 4);
    gw_key(&w, "strs", BATON_GGUF_ARRAY), gw_le(&w, BATON_GGUF_STRING, 4), gw_le(&w, 3, 8);
    gw_str(&w, "a"), gw_str(&w, ""), gw_str(&w, "ccc");
    gw_str(&w, "t"), gw_le(&w, 2, 4), gw_le(&w, 8, 8), gw_le(&w, 2, 8),
        gw_le(&w, BATON_TYPE_F32, 4), gw_le(&w, 0, 8);
    gw_str(&w, "u"), gw_le(&w, 1, 4), gw_le(&w, 4, 8), gw_le(&w, BATON_TYPE_I32, 4),
        gw_le(&w, 64, 8);
    size_t infos_end = w.len;
    gw_pad(&w, 64);
    size_t data = w.len;
    assert_true(data > infos_end && data % 64 == 0);
    for (int i = 0; i < 80; i++)
        gw_le(&w, (uint64_t)i, 1);

    assert_int_equal(gw_open(&w, &g, err, sizeof err), 0);
    assert_int_equal(baton_gguf_alignment(g), 64);
    assert_int_equal(baton_gguf_data_offset(g), data);
    assert_int_equal(baton_gguf_n_kv(g), 15);

    uint32_t u;
    float f;
    int b;
    const char *s;
    size_t len;
    struct baton_gguf_scalar sc;
    assert_int_equal(baton_gguf_get_u32(g, "u8", &u), 0);
    assert_int_equal(u, 200);
    assert_int_equal(baton_gguf_get_u32(g, "u16", &u), 0);
    assert_int_equal(u, 60000);
    assert_int_equal(baton_gguf_get_u32(g, "u32", &u), 0);
    assert_int_equal(u, 4000000000u);
    assert_int_equal(baton_gguf_get_u32(g, "i8", &u), BATON_E_BOUNDS);
    assert_int_equal(baton_gguf_get_u32(g, "i32", &u), BATON_E_BOUNDS);
    assert_int_equal(baton_gguf_get_u32(g, "u64", &u), BATON_E_BOUNDS);
    assert_int_equal(baton_gguf_get_u32(g, "i64", &u), BATON_E_BOUNDS);
    assert_int_equal(baton_gguf_get_u32(g, "bool", &u), BATON_E_TYPE);
    assert_int_equal(baton_gguf_get_u32(g, "f32", &u), BATON_E_TYPE);
    assert_int_equal(baton_gguf_get_u32(g, "arr", &u), BATON_E_TYPE);
    assert_int_equal(baton_gguf_get_f32(g, "f32", &f), 0);
    assert_true(f == 1.5f);
    assert_int_equal(baton_gguf_get_f32(g, "f64", &f), 0);
    assert_true(f == 0.1f);
    assert_int_equal(baton_gguf_get_bool(g, "bool", &b), 0);
    assert_int_equal(b, 1);
    assert_int_equal(baton_gguf_get_bool(g, "u8", &b), BATON_E_TYPE);
    assert_int_equal(baton_gguf_get_string(g, "str", &s, &len), 0);
    assert_int_equal(len, 2);
    assert_memory_equal(s, "hi", 2);
    assert_int_equal(baton_gguf_kv_scalar(baton_gguf_find_key(g, "i16"), &sc), 0);
    assert_int_equal(sc.type, BATON_GGUF_I16);
    assert_true(sc.v.i == -300);
    assert_int_equal(baton_gguf_kv_scalar(baton_gguf_find_key(g, "i64"), &sc), 0);
    assert_true(sc.v.i == -(int64_t)(1ll << 40));
    assert_int_equal(baton_gguf_kv_scalar(baton_gguf_find_key(g, "u64"), &sc), 0);
    assert_true(sc.v.u == 1ull << 40);
    assert_int_equal(baton_gguf_kv_scalar(baton_gguf_find_key(g, "f64"), &sc), 0);
    assert_true(sc.v.f == 0.1);

    const struct baton_gguf_kv *arr = baton_gguf_find_key(g, "arr");
    int32_t v;
    assert_int_equal(baton_gguf_arr_i32(arr, 0, &v), 0);
    assert_int_equal(v, 1);
    assert_int_equal(baton_gguf_arr_i32(arr, 1, &v), 0);
    assert_int_equal(v, -2);
    assert_int_equal(baton_gguf_arr_i32(arr, 2, &v), 0);
    assert_int_equal(v, 3);
    assert_int_equal(baton_gguf_arr_i32(arr, 3, &v), BATON_E_BOUNDS);
    assert_int_equal(baton_gguf_arr_f32(arr, 0, &f), BATON_E_TYPE);
    const struct baton_gguf_kv *strs = baton_gguf_find_key(g, "strs");
    assert_int_equal(baton_gguf_arr_string(strs, 0, &s, &len), 0);
    assert_int_equal(len, 1);
    assert_memory_equal(s, "a", 1);
    assert_int_equal(baton_gguf_arr_string(strs, 1, &s, &len), 0);
    assert_int_equal(len, 0);
    assert_int_equal(baton_gguf_arr_string(strs, 2, &s, &len), 0);
    assert_int_equal(len, 3);
    assert_memory_equal(s, "ccc", 3);
    assert_int_equal(baton_gguf_arr_i32(strs, 0, &v), BATON_E_TYPE);

    struct baton_gguf_tensor t;
    assert_int_equal(baton_gguf_find_tensor(g, "u", &t, NULL), 0);
    assert_int_equal(t.file_offset, data + 64);
    assert_int_equal(t.nbytes, 16);
    assert_int_equal(((const uint8_t *)t.data)[0], 64);
    assert_int_equal(baton_gguf_find_tensor(g, "t", &t, NULL), 0);
    assert_int_equal(t.nbytes, 64);
    assert_int_equal(t.ne[1], 2);
    baton_gguf_close(g);
}

/* A file with one key (general.alignment of the given type and value) and
 * one 1-element F32 tensor at offset 0 in the data section. */
static int open_aligned(uint32_t type, uint64_t value, unsigned value_bytes, size_t pad_to,
                        char *err, size_t err_len, uint64_t *data_offset)
{
    struct gw w;
    struct baton_gguf *g = NULL;
    gw_header(&w, 3, 1, 1);
    gw_key(&w, "general.alignment", type);
    gw_le(&w, value, value_bytes);
    gw_str(&w, "x"), gw_le(&w, 1, 4), gw_le(&w, 1, 8), gw_le(&w, BATON_TYPE_F32, 4),
        gw_le(&w, 0, 8);
    gw_pad(&w, pad_to);
    gw_le(&w, 0x3f800000u, 4);
    int st = gw_open(&w, &g, err, err_len);
    if (st == 0)
        *data_offset = baton_gguf_data_offset(g);
    baton_gguf_close(g);
    return st;
}

static void test_alignment(void **state)
{
    (void)state;
    char err[512];
    uint64_t data = 0;
    /* Header 24 + key (8 + 17 + 4 + 4) + info (8 + 1 + 4 + 8 + 4 + 8) = 90. */
    assert_int_equal(open_aligned(BATON_GGUF_U32, 1, 4, 1, err, sizeof err, &data), 0);
    assert_int_equal(data, 90);
    assert_int_equal(open_aligned(BATON_GGUF_U32, 2, 4, 2, err, sizeof err, &data), 0);
    assert_int_equal(data, 90);
    assert_int_equal(open_aligned(BATON_GGUF_U32, 16, 4, 16, err, sizeof err, &data), 0);
    assert_int_equal(data, 96);
    assert_int_equal(open_aligned(BATON_GGUF_U32, 128, 4, 128, err, sizeof err, &data), 0);
    assert_int_equal(data, 128);
    assert_int_equal(open_aligned(BATON_GGUF_U32, 0, 4, 1, err, sizeof err, &data), BATON_E_FORMAT);
    assert_string_equal(
        err, "syn.gguf: key 'general.alignment': alignment 0 is not a power of 2 in 1..1048576");
    assert_int_equal(open_aligned(BATON_GGUF_U32, 48, 4, 48, err, sizeof err, &data),
                     BATON_E_FORMAT);
    assert_non_null(strstr(err, "alignment 48 is not a power of 2"));
    assert_int_equal(open_aligned(BATON_GGUF_U32, 1u << 31, 4, 1, err, sizeof err, &data),
                     BATON_E_FORMAT);
    assert_int_equal(open_aligned(BATON_GGUF_U64, 32, 8, 32, err, sizeof err, &data),
                     BATON_E_FORMAT);
    assert_non_null(strstr(err, "key 'general.alignment': type u64, expected u32"));
    /* Alignment 256 but the file ends before the padded data section. */
    assert_int_equal(open_aligned(BATON_GGUF_U32, 256, 4, 1, err, sizeof err, &data),
                     BATON_E_TRUNCATED);
    assert_non_null(strstr(err, "data section (offset 256) starts past end of file"));
}

static void test_synthetic_misc(void **state)
{
    (void)state;
    struct gw w;
    struct baton_gguf *g = NULL;
    char err[512];

    /* Vocabulary-only file: no tensors, no padding; an empty string array. */
    gw_header(&w, 3, 0, 1);
    gw_key(&w, "e", BATON_GGUF_ARRAY), gw_le(&w, BATON_GGUF_STRING, 4), gw_le(&w, 0, 8);
    assert_int_equal(gw_open(&w, &g, err, sizeof err), 0);
    assert_int_equal(baton_gguf_n_tensors(g), 0);
    uint32_t et;
    uint64_t count = 9;
    assert_int_equal(baton_gguf_kv_array(baton_gguf_find_key(g, "e"), &et, &count), 0);
    assert_int_equal(count, 0);
    baton_gguf_close(g);

    /* Bools must be 0 or 1, alone and in arrays. */
    gw_header(&w, 3, 0, 1);
    gw_key(&w, "b", BATON_GGUF_BOOL), gw_le(&w, 2, 1);
    assert_int_equal(gw_open(&w, &g, err, sizeof err), BATON_E_FORMAT);
    assert_string_equal(err, "syn.gguf: key 'b': bool value 2 is not 0 or 1");
    gw_header(&w, 3, 0, 1);
    gw_key(&w, "b", BATON_GGUF_ARRAY), gw_le(&w, BATON_GGUF_BOOL, 4), gw_le(&w, 3, 8);
    gw_le(&w, 0, 1), gw_le(&w, 1, 1), gw_le(&w, 0xff, 1);
    assert_int_equal(gw_open(&w, &g, err, sizeof err), BATON_E_FORMAT);
    assert_string_equal(err, "syn.gguf: key 'b': element 2: bool value 255 is not 0 or 1");

    /* Nested array. */
    gw_header(&w, 3, 0, 1);
    gw_key(&w, "n", BATON_GGUF_ARRAY), gw_le(&w, BATON_GGUF_ARRAY, 4), gw_le(&w, 1, 8);
    gw_le(&w, BATON_GGUF_U8, 4), gw_le(&w, 1, 8), gw_le(&w, 7, 1);
    assert_int_equal(gw_open(&w, &g, err, sizeof err), BATON_E_FORMAT);
    assert_string_equal(err, "syn.gguf: key 'n': nested arrays are not supported");

    /* A non-printable key is shown escaped in the message. */
    gw_header(&w, 3, 0, 1);
    gw_key(&w, "a\x01\xff", 77);
    assert_int_equal(gw_open(&w, &g, err, sizeof err), BATON_E_FORMAT);
    assert_string_equal(err, "syn.gguf: key 'a\\x01\\xff': unknown value type 77");

    /* Scalar value cut short. */
    gw_header(&w, 3, 0, 1);
    gw_key(&w, "x", BATON_GGUF_U64), gw_le(&w, 1, 4);
    assert_int_equal(gw_open(&w, &g, err, sizeof err), BATON_E_TRUNCATED);
    assert_string_equal(err, "syn.gguf: key 'x': u64 value truncated");

    /* A tensor type with 0 dims is a scalar. */
    gw_header(&w, 2, 1, 0);
    gw_str(&w, "s"), gw_le(&w, 0, 4), gw_le(&w, BATON_TYPE_F32, 4), gw_le(&w, 0, 8);
    gw_pad(&w, 32);
    gw_le(&w, 0, 4);
    assert_int_equal(gw_open(&w, &g, err, sizeof err), 0);
    struct baton_gguf_tensor t;
    assert_int_equal(baton_gguf_tensor_at(g, 0, &t), 0);
    assert_int_equal(t.n_dims, 0);
    assert_int_equal(t.nbytes, 4);
    assert_int_equal(baton_gguf_version(g), 2);
    baton_gguf_close(g);

    /* Byte size over 2^63 with an element count that fits: Q8_0, ne[0] =
     * 2^63 - 32 elements = 2^58 - 1 blocks of 34 bytes. */
    gw_header(&w, 3, 1, 0);
    gw_str(&w, "q"), gw_le(&w, 1, 4), gw_le(&w, (1ull << 63) - 32, 8),
        gw_le(&w, BATON_TYPE_Q8_0, 4), gw_le(&w, 0, 8);
    assert_int_equal(gw_open(&w, &g, err, sizeof err), BATON_E_OVERFLOW);
    assert_string_equal(err, "syn.gguf: tensor 0 'q': byte size overflows");
}

/* K-quant tensors: accepted with their super-block sizes; rows that are
 * not a multiple of 256 and data cut inside a super-block are errors that
 * name the file and the tensor. */
static void test_k_quant_tensors(void **state)
{
    static const struct {
        uint32_t type;
        const char *name;
        uint64_t bytes;
    } k[] = {{BATON_TYPE_Q2_K, "q2_k", 84},
             {BATON_TYPE_Q3_K, "q3_k", 110},
             {BATON_TYPE_Q4_K, "q4_k", 144},
             {BATON_TYPE_Q5_K, "q5_k", 176},
             {BATON_TYPE_Q6_K, "q6_k", 210}};
    struct gw w;
    struct baton_gguf *g = NULL;
    struct baton_gguf_tensor t;
    char err[512], want[256];
    (void)state;

    for (size_t i = 0; i < sizeof k / sizeof k[0]; i++) {
        /* 512 x 3: 2 super-blocks per row, 6 in all */
        gw_header(&w, 3, 1, 0);
        gw_str(&w, "blk.0.ffn_up.weight"), gw_le(&w, 2, 4), gw_le(&w, 512, 8), gw_le(&w, 3, 8),
            gw_le(&w, k[i].type, 4), gw_le(&w, 0, 8);
        gw_pad(&w, 32);
        const size_t data = w.len;
        for (uint64_t b = 0; b < 6 * k[i].bytes; b++)
            gw_le(&w, b & 0xff, 1);
        assert_int_equal(gw_open(&w, &g, err, sizeof err), 0);
        assert_int_equal(baton_gguf_tensor_at(g, 0, &t), 0);
        assert_int_equal(t.type, k[i].type);
        assert_int_equal(t.nbytes, 6 * k[i].bytes);
        baton_gguf_close(g);
        g = NULL;

        /* the last super-block cut short by one byte */
        w.len = data + 6 * k[i].bytes - 1;
        assert_int_equal(gw_open(&w, &g, err, sizeof err), BATON_E_BOUNDS);
        snprintf(want, sizeof want,
                 "syn.gguf: tensor 0 'blk.0.ffn_up.weight': data past end of file (offset 0, "
                 "%llu bytes = 6 %s blocks of %llu bytes, %llu available)",
                 (unsigned long long)(6 * k[i].bytes), k[i].name, (unsigned long long)k[i].bytes,
                 (unsigned long long)(6 * k[i].bytes - 1));
        assert_string_equal(err, want);

        /* rows of 320: not a multiple of 256 */
        gw_header(&w, 3, 1, 0);
        gw_str(&w, "output.weight"), gw_le(&w, 2, 4), gw_le(&w, 320, 8), gw_le(&w, 2, 8),
            gw_le(&w, k[i].type, 4), gw_le(&w, 0, 8);
        gw_pad(&w, 32);
        for (uint64_t b = 0; b < 4 * k[i].bytes; b++)
            gw_le(&w, 0, 1);
        assert_int_equal(gw_open(&w, &g, err, sizeof err), BATON_E_SHAPE);
        snprintf(want, sizeof want,
                 "syn.gguf: tensor 0 'output.weight': ne[0] 320 is not a multiple of the %s "
                 "block size 256",
                 k[i].name);
        assert_string_equal(err, want);
    }
    /* 15 (Q8_K, an intermediate type of llama.cpp's that files do not hold)
     * stays unknown */
    gw_header(&w, 3, 1, 0);
    gw_str(&w, "w"), gw_le(&w, 1, 4), gw_le(&w, 256, 8), gw_le(&w, 15, 4), gw_le(&w, 0, 8);
    assert_int_equal(gw_open(&w, &g, err, sizeof err), BATON_E_TYPE);
    assert_string_equal(err, "syn.gguf: tensor 0 'w': tensor type 15 (ggml's q8_k) is not one "
                             "baton runs (f32, f16, bf16, q8_0, q4_0, q5_0, q5_1, q2_k..q6_k, "
                             "iq4_nl, iq4_xs)");
}

/* One F32 tensor info: name, ne[0] floats, offset in the data section. */
static void gw_f32_info(struct gw *w, const char *name, uint64_t n, uint64_t offset)
{
    gw_str(w, name), gw_le(w, 1, 4), gw_le(w, n, 8), gw_le(w, BATON_TYPE_F32, 4),
        gw_le(w, offset, 8);
}

/* A file of n F32 tensors (names, float counts and offsets from the
 * arrays) and data_bytes of data; returns the status of opening it. */
static int open_infos(size_t n, const char *const *names, const uint64_t *floats,
                      const uint64_t *offsets, size_t data_bytes, char *err, size_t err_len)
{
    struct gw w;
    struct baton_gguf *g = NULL;
    gw_header(&w, 3, n, 0);
    for (size_t i = 0; i < n; i++)
        gw_f32_info(&w, names[i], floats[i], offsets[i]);
    gw_pad(&w, 32);
    const size_t data = w.len;
    for (size_t b = 0; b < data_bytes; b++)
        gw_le(&w, b & 0xff, 1);
    err[0] = '\0';
    int st = gw_open(&w, &g, err, err_len);
    if (st == 0) {
        /* every tensor's data is where its offset says, and the last byte of
         * the file is the last byte of one of them */
        struct baton_gguf_tensor t;
        uint64_t end = 0;
        for (size_t i = 0; i < n; i++) {
            assert_int_equal(baton_gguf_find_tensor(g, names[i], &t, NULL), 0);
            assert_int_equal(t.file_offset, data + offsets[i]);
            assert_int_equal(t.nbytes, floats[i] * 4);
            if (t.nbytes > 0 && t.offset + t.nbytes > end)
                end = t.offset + t.nbytes;
        }
        assert_int_equal(end, data_bytes);
        baton_gguf_close(g);
    }
    return st;
}

/* Tensors whose data ranges share a byte are refused, naming the file and
 * both tensors, whatever order the table lists them in. */
static void test_overlaps(void **state)
{
    (void)state;
    char err[512];
    static const char *const abc[] = {"a", "b", "c"};

    /* every tensor at offset 0 */
    const uint64_t eight[] = {8, 8, 8}, zero[] = {0, 0, 0};
    assert_int_equal(open_infos(3, abc, eight, zero, 32, err, sizeof err), BATON_E_FORMAT);
    assert_string_equal(err, "syn.gguf: tensor 1 'b': data (offset 0, 32 bytes) overlaps that of "
                             "tensor 0 'a' (offset 0, 32 bytes)");

    /* b starts half way into a (64 bytes each) */
    const uint64_t sixteen[] = {16, 16, 16}, half[] = {0, 32, 96};
    assert_int_equal(open_infos(3, abc, sixteen, half, 160, err, sizeof err), BATON_E_FORMAT);
    assert_string_equal(err, "syn.gguf: tensor 1 'b': data (offset 32, 64 bytes) overlaps that "
                             "of tensor 0 'a' (offset 0, 64 bytes)");
    /* the same, listed the other way round: the later one in the table is
     * named first */
    const uint64_t half_rev[] = {96, 32, 0};
    assert_int_equal(open_infos(3, abc, sixteen, half_rev, 160, err, sizeof err),
                     BATON_E_FORMAT);
    assert_string_equal(err, "syn.gguf: tensor 2 'c': data (offset 0, 64 bytes) overlaps that "
                             "of tensor 1 'b' (offset 32, 64 bytes)");
    /* the last 32 bytes of a 96-byte tensor under a 32-byte one listed far
     * from it in the table */
    static const char *const five[] = {"big", "x", "y", "z", "small"};
    const uint64_t five_n[] = {24, 8, 8, 8, 8}, five_off[] = {0, 96, 128, 160, 64};
    assert_int_equal(open_infos(5, five, five_n, five_off, 192, err, sizeof err),
                     BATON_E_FORMAT);
    assert_string_equal(err, "syn.gguf: tensor 4 'small': data (offset 64, 32 bytes) overlaps "
                             "that of tensor 0 'big' (offset 0, 96 bytes)");

    /* legal: listed out of offset order, back to back, the last ending
     * exactly at the end of the file; an empty tensor holds no byte, so it
     * may sit at any offset, even inside another */
    const uint64_t legal_n[] = {8, 16, 8, 0}, legal_off[] = {96, 0, 64, 32};
    static const char *const legal[] = {"last", "first", "middle", "empty"};
    assert_int_equal(open_infos(4, legal, legal_n, legal_off, 128, err, sizeof err), 0);
    assert_string_equal(err, "");
    /* one byte short of the file for the last one: past its end, not an overlap */
    assert_int_equal(open_infos(4, legal, legal_n, legal_off, 127, err, sizeof err),
                     BATON_E_BOUNDS);
    assert_non_null(strstr(err, "tensor 0 'last': data past end of file"));
}

/* baton_gguf_escape(cap, s) is want. */
static void expect_escape(size_t cap, const char *s, size_t len, const char *want)
{
    char dst[64];
    memset(dst, 'z', sizeof dst);
    assert_true(cap <= sizeof dst);
    assert_ptr_equal(baton_gguf_escape(dst, cap, s, len), dst);
    if (strcmp(dst, want) != 0)
        fail_msg("escape(%zu, %zu bytes): '%s', want '%s'", cap, len, dst, want);
    assert_true(strlen(dst) < cap);
    if (cap < sizeof dst)
        assert_int_equal(dst[cap], 'z'); /* nothing past cap */
}

#define ESC(cap, lit, want) expect_escape(cap, lit, sizeof lit - 1, want)

/* The escaping of every message that quotes a string from a model file:
 * C0, DEL, backslash, C1 (in UTF-8 and raw) and invalid UTF-8 escaped,
 * other UTF-8 kept, cut whole with "..." to fit. */
static void test_escape(void **state)
{
    (void)state;
    ESC(64, "blk.0.attn_q.weight", "blk.0.attn_q.weight");
    ESC(64, "", "");
    ESC(64, "\x1b[2Jx\x07", "\\x1b[2Jx\\x07");
    ESC(64, "a\x00" "b\x7f\n", "a\\x00b\\x7f\\x0a");
    ESC(64, "a\\x1b", "a\\\\x1b"); /* a literal backslash is not an escape */
    /* C1 in UTF-8 (U+0080, U+009B CSI, U+009F); U+00A0 and up are text */
    ESC(64, "\xc2\x80\xc2\x9b\xc2\x9f", "\\xc2\\x80\\xc2\\x9b\\xc2\\x9f");
    ESC(64, "\xc2\xa0\xc3\xa9\xe2\x96\x81\xf0\x9f\x98\x80",
        "\xc2\xa0\xc3\xa9\xe2\x96\x81\xf0\x9f\x98\x80");
    /* bytes outside valid UTF-8: raw C1, 0xff, a cut sequence, overlong,
     * surrogate, past U+10FFFF */
    ESC(64, "\x9b[2J", "\\x9b[2J");
    ESC(64, "\x80\xff", "\\x80\\xff");
    ESC(64, "x\xe2\x96", "x\\xe2\\x96");
    ESC(64, "\xc0\x80\xc1\x9b", "\\xc0\\x80\\xc1\\x9b");
    ESC(64, "\xed\xa0\x80", "\\xed\\xa0\\x80");
    ESC(64, "\xf4\x90\x80\x80", "\\xf4\\x90\\x80\\x80");
    ESC(64, "\xc2", "\\xc2");
    /* cut to fit cap - 1 bytes, at a whole character or escape, "..." */
    ESC(8, "abcdefg", "abcdefg");
    ESC(8, "abcdefgh", "abcd...");
    ESC(9, "\x1b\x1b", "\\x1b\\x1b");
    ESC(8, "\x1b\x1b", "\\x1b...");
    ESC(7, "\x1b\x1b", "...");
    ESC(11, "a\xe2\x96\x81\xe2\x96\x81\xe2\x96\x81", "a\xe2\x96\x81\xe2\x96\x81\xe2\x96\x81");
    ESC(10, "a\xe2\x96\x81\xe2\x96\x81\xe2\x96\x81", "a\xe2\x96\x81...");
    ESC(7, "a\xe2\x96\x81\xe2\x96\x81\xe2\x96\x81", "a...");
    ESC(12, "\xc2\x9b\xc2\x9b", "\\xc2\\x9b...");
    ESC(11, "\xc2\x9b\xc2\x9b", "...");
    ESC(4, "abcd", "...");
    ESC(4, "abc", "abc");
    ESC(3, "abc", "");
    ESC(1, "abc", "");
    char one = 'q';
    assert_ptr_equal(baton_gguf_escape(&one, 0, "abc", 3), &one);
    assert_int_equal(one, 'q');

    assert_int_equal(baton_gguf_utf8_len("a", 1), 1);
    assert_int_equal(baton_gguf_utf8_len("\xc2\x9b", 2), 2);
    assert_int_equal(baton_gguf_utf8_len("\xc2\x9b", 1), 0);
    assert_int_equal(baton_gguf_utf8_len("\xe2\x96\x81", 3), 3);
    assert_int_equal(baton_gguf_utf8_len("\xf0\x9f\x98\x80", 4), 4);
    assert_int_equal(baton_gguf_utf8_len("\x9b", 1), 0);
    assert_int_equal(baton_gguf_utf8_len("", 0), 0);

    /* the reader's messages quote keys and tensor names through it */
    struct gw w;
    struct baton_gguf *g = NULL;
    char err[512];
    gw_header(&w, 3, 0, 1);
    gw_key(&w, "k\x1b[2J\xc2\x9b", 77);
    assert_int_equal(gw_open(&w, &g, err, sizeof err), BATON_E_FORMAT);
    assert_string_equal(err, "syn.gguf: key 'k\\x1b[2J\\xc2\\x9b': unknown value type 77");
    gw_header(&w, 3, 1, 0);
    gw_str(&w, "t\x9b"), gw_le(&w, 1, 4), gw_le(&w, 1, 8), gw_le(&w, 99, 4), gw_le(&w, 0, 8);
    assert_int_equal(gw_open(&w, &g, err, sizeof err), BATON_E_TYPE);
    assert_string_equal(err, "syn.gguf: tensor 0 't\\x9b': unknown tensor type 99");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_real_file),        cmocka_unit_test(test_open_errors),
        cmocka_unit_test(test_truncated),        cmocka_unit_test(test_corrupt_header),
        cmocka_unit_test(test_corrupt_metadata), cmocka_unit_test(test_corrupt_tensor),
        cmocka_unit_test(test_all_types),        cmocka_unit_test(test_alignment),
        cmocka_unit_test(test_synthetic_misc),   cmocka_unit_test(test_k_quant_tensors),
        cmocka_unit_test(test_overlaps),         cmocka_unit_test(test_escape),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    free(model);
    return rc;
}
