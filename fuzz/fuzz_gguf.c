/* Fuzz target gguf: the GGUF reader (src/model/gguf.h) over arbitrary
 * bytes, with baton_gguf_open_buffer, then every accessor over what it
 * accepted; and the two consumers of GGUF metadata that run before any
 * server is contacted: the tokenizer (baton_tokenizer_from_gguf) and the
 * llama hyperparameters (baton_llama_hparams_load).
 *
 * The input is an exact-size heap copy, so any read past the "file" is a
 * heap overflow under ASan; each tensor's first and last data byte are read.
 *
 * Properties of an accepted file (gguf.h): version 2..3; alignment a power
 * of two; the data section is aligned and, when there are tensors, starts
 * inside the file; every key is
 * non-empty, unique (find_key finds this very pair) and NUL-terminated;
 * string values and array strings lie inside the file; every tensor has a
 * known type, n_dims <= 4 with ne[i] = 1 beyond it, nbytes equal to the
 * 128-bit product of its shape by the type's block size, an aligned offset,
 * data inside the file at data_offset + offset, and find_tensor finds it;
 * no two tensors' data ranges share a byte (checked pairwise among the first
 * OVERLAP_CHECKED tensors). Index accessors reject i == n.
 */
#include "fuzz_common.h"

#include "baton/status.h"
#include "core/types.h"
#include "model/chat.h"
#include "model/gguf.h"
#include "model/llama.h"
#include "model/tokenizer.h"

#define ELEMS_CHECKED 64u    /* per array: the first ones and the last */
#define OVERLAP_CHECKED 512u /* tensors compared pairwise for overlapping data */

static volatile uint8_t sink;

static void inside(const struct baton_gguf *g, const void *ptr, uint64_t len, const char *what)
{
    const uint8_t *base = baton_gguf_base(g), *p = ptr;
    uint64_t size = baton_gguf_file_size(g);
    FUZZ_CHECK(p >= base && (uint64_t)(p - base) <= size && len <= size - (uint64_t)(p - base),
               "%s outside the file", what);
    if (len > 0)
        sink ^= p[0] ^ p[len - 1];
}

static void check_array(const struct baton_gguf *g, const struct baton_gguf_kv *kv)
{
    uint32_t et = 0;
    uint64_t count = 0;
    FUZZ_CHECK(baton_gguf_kv_array(kv, &et, &count) == 0, "array pair is not an array");
    FUZZ_CHECK(et < BATON_GGUF_TYPE_COUNT && et != BATON_GGUF_ARRAY, "array element type %u", et);
    FUZZ_CHECK(count <= BATON_GGUF_MAX_ARRAY_ELEMS, "array count");
    for (uint64_t k = 0; k < count && k < ELEMS_CHECKED + 1; k++) {
        uint64_t i = k < ELEMS_CHECKED ? k : count - 1;
        struct baton_gguf_scalar v;
        const char *s;
        size_t sl;
        float f;
        int32_t i32;
        FUZZ_CHECK(baton_gguf_arr_get(kv, i, &v) == 0, "element %llu", (unsigned long long)i);
        FUZZ_CHECK(v.type == et, "element type");
        if (et == BATON_GGUF_STRING) {
            inside(g, v.v.str.ptr, v.v.str.len, "array string");
            FUZZ_CHECK(baton_gguf_arr_string(kv, i, &s, &sl) == 0 && s == v.v.str.ptr &&
                           sl == v.v.str.len,
                       "arr_string disagrees with arr_get");
        }
        (void)baton_gguf_arr_f32(kv, i, &f);
        (void)baton_gguf_arr_i32(kv, i, &i32);
    }
    struct baton_gguf_scalar v;
    FUZZ_CHECK(baton_gguf_arr_get(kv, count, &v) != 0, "element count accepted");
}

static void check_kvs(const struct baton_gguf *g)
{
    uint64_t n = baton_gguf_n_kv(g);
    FUZZ_CHECK(n <= BATON_GGUF_MAX_KV, "n_kv");
    for (uint64_t i = 0; i < n; i++) {
        const struct baton_gguf_kv *kv = baton_gguf_kv_at(g, i);
        FUZZ_CHECK(kv != NULL, "kv_at(%llu) NULL", (unsigned long long)i);
        const char *key = baton_gguf_kv_key(kv);
        size_t kl = strlen(key);
        FUZZ_CHECK(kl > 0 && kl <= BATON_GGUF_MAX_KEY_BYTES, "key length %zu", kl);
        FUZZ_CHECK(baton_gguf_find_key(g, key) == kv, "find_key('%s') is another pair", key);
        uint32_t type = baton_gguf_kv_type(kv);
        FUZZ_CHECK(type < BATON_GGUF_TYPE_COUNT, "value type %u", type);
        (void)baton_gguf_type_name(type);
        if (type == BATON_GGUF_ARRAY) {
            check_array(g, kv);
            struct baton_gguf_scalar v;
            FUZZ_CHECK(baton_gguf_kv_scalar(kv, &v) == BATON_E_TYPE, "array read as scalar");
            continue;
        }
        struct baton_gguf_scalar v;
        uint32_t u;
        float f;
        int b;
        const char *s;
        size_t sl;
        FUZZ_CHECK(baton_gguf_kv_scalar(kv, &v) == 0 && v.type == type, "scalar");
        if (type == BATON_GGUF_STRING) {
            inside(g, v.v.str.ptr, v.v.str.len, "string value");
            FUZZ_CHECK(baton_gguf_kv_string(kv, &s, &sl) == 0 && s == v.v.str.ptr, "kv_string");
        }
        if (type == BATON_GGUF_BOOL)
            FUZZ_CHECK(v.v.u <= 1, "bool value %llu", (unsigned long long)v.v.u);
        (void)baton_gguf_kv_u32(kv, &u);
        (void)baton_gguf_kv_f32(kv, &f);
        (void)baton_gguf_kv_bool(kv, &b);
        uint32_t et;
        uint64_t count;
        FUZZ_CHECK(baton_gguf_kv_array(kv, &et, &count) == BATON_E_TYPE, "scalar read as array");
    }
    FUZZ_CHECK(baton_gguf_kv_at(g, n) == NULL, "kv_at(n) not NULL");
}

static void check_tensors(const struct baton_gguf *g)
{
    uint64_t n = baton_gguf_n_tensors(g);
    uint64_t size = baton_gguf_file_size(g), data_off = baton_gguf_data_offset(g);
    uint32_t align = baton_gguf_alignment(g);
    FUZZ_CHECK(n <= BATON_GGUF_MAX_TENSORS, "n_tensors");
    for (uint64_t i = 0; i < n; i++) {
        struct baton_gguf_tensor t, t2;
        uint64_t idx = ~0ull;
        uint32_t be, bb;
        FUZZ_CHECK(baton_gguf_tensor_at(g, i, &t) == 0, "tensor_at");
        size_t nl = strlen(t.name);
        FUZZ_CHECK(nl > 0 && nl <= BATON_GGUF_MAX_NAME_BYTES, "tensor name length %zu", nl);
        FUZZ_CHECK(baton_type_block(t.type, &be, &bb) == 0, "tensor type %u", t.type);
        FUZZ_CHECK(t.n_dims <= BATON_MAX_DIMS, "n_dims %u", t.n_dims);
        unsigned __int128 elems = 1;
        for (uint32_t d = 0; d < BATON_MAX_DIMS; d++) {
            if (d >= t.n_dims)
                FUZZ_CHECK(t.ne[d] == 1, "ne[%u] beyond n_dims", d);
            /* saturated at 2^64 before each multiply, so no 128-bit wrap;
             * a saturated count can only mismatch nbytes */
            elems *= t.ne[d];
            if (elems > ((unsigned __int128)1 << 64))
                elems = (unsigned __int128)1 << 64;
        }
        FUZZ_CHECK(t.ne[0] % be == 0, "ne[0] not a block multiple");
        unsigned __int128 want = elems / be * bb;
        FUZZ_CHECK(want == t.nbytes, "tensor %llu nbytes %llu", (unsigned long long)i,
                   (unsigned long long)t.nbytes);
        FUZZ_CHECK(t.offset % align == 0, "tensor offset not aligned");
        FUZZ_CHECK(t.offset <= UINT64_MAX - data_off && t.file_offset == data_off + t.offset,
                   "file_offset");
        FUZZ_CHECK(t.file_offset <= size && t.nbytes <= size - t.file_offset, "data outside file");
        FUZZ_CHECK((const uint8_t *)t.data == (const uint8_t *)baton_gguf_base(g) + t.file_offset,
                   "data pointer");
        inside(g, t.data, t.nbytes, "tensor data");
        FUZZ_CHECK(baton_gguf_find_tensor(g, t.name, &t2, &idx) == 0 && idx == i,
                   "find_tensor('%s')", t.name);
    }
    /* an oracle that shares nothing with the reader's sort: every pair */
    for (uint64_t i = 0; i < n && i < OVERLAP_CHECKED; i++) {
        struct baton_gguf_tensor a, b;
        FUZZ_CHECK(baton_gguf_tensor_at(g, i, &a) == 0, "tensor_at");
        for (uint64_t j = i + 1; j < n && j < OVERLAP_CHECKED; j++) {
            FUZZ_CHECK(baton_gguf_tensor_at(g, j, &b) == 0, "tensor_at");
            /* both ranges lie inside the file (checked above): no wrap */
            FUZZ_CHECK(a.nbytes == 0 || b.nbytes == 0 || a.offset + a.nbytes <= b.offset ||
                           b.offset + b.nbytes <= a.offset,
                       "tensors %llu and %llu overlap", (unsigned long long)i,
                       (unsigned long long)j);
        }
    }
    struct baton_gguf_tensor t;
    FUZZ_CHECK(baton_gguf_tensor_at(g, n, &t) == BATON_E_BOUNDS, "tensor_at(n)");
    FUZZ_CHECK(baton_gguf_find_tensor(g, "", &t, NULL) == BATON_E_NOT_FOUND, "empty name found");
}

static void check_tokenizer(const struct baton_gguf *g)
{
    struct baton_tokenizer *tok = NULL;
    char err[256];
    if (baton_tokenizer_from_gguf(g, &tok, err, sizeof err) != 0) {
        FUZZ_CHECK(tok == NULL, "tokenizer returned with an error");
        return;
    }
    static const char text[] = "Once upon a time, \xe2\x96\x81 \xff\x00 there";
    int32_t ids[256];
    size_t n_ids = 0;
    uint32_t nv = baton_tokenizer_n_vocab(tok);
    int rc = baton_tokenize(tok, text, sizeof text - 1, 1, ids, 256, &n_ids);
    if (rc == 0) {
        char out[1024];
        size_t len;
        for (size_t i = 0; i < n_ids; i++)
            FUZZ_CHECK(ids[i] >= 0 && (uint32_t)ids[i] < nv, "id %d of %u", ids[i], nv);
        (void)baton_detokenize(tok, ids, n_ids, out, sizeof out, &len);
    }
    /* --chat's reading of the file: the template key recognized (or a
     * message naming it), the layout's control tokens looked up, a layout
     * made and tokenized with its spans */
    enum baton_chat_template t = BATON_CHAT_UNKNOWN;
    char cerr[256] = "";
    rc = baton_chat_template_for(g, NULL, NULL, 0, &t, cerr, sizeof cerr);
    FUZZ_CHECK(rc == 0 ? t != BATON_CHAT_UNKNOWN : cerr[0] != '\0', "chat template: rc %d", rc);
    {
        /* with the tokenizer: refused exactly when a marker is missing */
        enum baton_chat_template t2 = BATON_CHAT_UNKNOWN;
        char cerr2[256] = "";
        int rc2 = baton_chat_template_for(g, NULL, tok, 1, &t2, cerr2, sizeof cerr2);
        FUZZ_CHECK(rc2 == (rc != 0                                    ? rc
                           : baton_chat_missing_marker(t, 1, tok) != NULL ? BATON_E_UNSUPPORTED
                                                                          : 0),
                   "chat template with the tokenizer: rc %d, without %d", rc2, rc);
        FUZZ_CHECK(rc2 == 0 || cerr2[0] != '\0', "chat template: no message for rc %d", rc2);
    }
    if (rc == 0) {
        struct baton_chat_prompt cp;
        (void)baton_chat_missing_marker(t, 0, tok);
        FUZZ_CHECK(baton_chat_format(t, "S", "hi", 2, &cp) == 0, "chat layout");
        rc = baton_tokenize_spans(tok, cp.text, cp.len, BATON_TOKENIZE_ADD_BOS, cp.spans,
                                  cp.n_spans, ids, 256, &n_ids);
        FUZZ_CHECK(rc == 0 || rc == BATON_E_LIMIT, "chat tokenize: rc %d", rc);
        for (size_t i = 0; rc == 0 && i < n_ids; i++)
            FUZZ_CHECK(ids[i] >= 0 && (uint32_t)ids[i] < nv, "chat id %d of %u", ids[i], nv);
        baton_chat_prompt_free(&cp);
    }
    baton_tokenizer_free(tok);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    uint8_t *buf = fuzz_dup(data, size);
    struct baton_gguf *g = NULL;
    char err[256];
    int rc = baton_gguf_open_buffer(buf, size, "fuzz.gguf", &g, err, sizeof err);
    if (rc != 0) {
        FUZZ_CHECK(g == NULL && rc < 0, "failed open left a handle (rc %d)", rc);
        FUZZ_CHECK(memchr(err, 0, sizeof err) != NULL && err[0] != 0, "no error message");
        goto out;
    }
    uint32_t v = baton_gguf_version(g), a = baton_gguf_alignment(g);
    FUZZ_CHECK(v >= BATON_GGUF_MIN_VERSION && v <= BATON_GGUF_MAX_VERSION, "version %u", v);
    FUZZ_CHECK(a != 0 && (a & (a - 1)) == 0 && a <= BATON_GGUF_MAX_ALIGNMENT, "alignment %u", a);
    FUZZ_CHECK(baton_gguf_file_size(g) == size && baton_gguf_base(g) == buf, "size/base");
    FUZZ_CHECK(baton_gguf_data_offset(g) % a == 0, "data section not aligned");
    /* a file without tensors may end before its (empty, padded) data section */
    FUZZ_CHECK(baton_gguf_n_tensors(g) == 0 || baton_gguf_data_offset(g) <= size,
               "data offset past the end");
    check_kvs(g);
    check_tensors(g);
    check_tokenizer(g);
    struct baton_llama_hparams hp;
    (void)baton_llama_hparams_load(g, &hp, err, sizeof err);
    baton_gguf_close(g);
out:
    free(buf);
    return 0;
}
