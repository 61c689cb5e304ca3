/* Minimal GGUF writer (gguf_writer.h). */
#include "gguf_writer.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/gguf.h"
#include "model/tokenizer.h"

void gw_init(struct gw *w)
{
    memset(w, 0, sizeof *w);
}

void gw_free(struct gw *w)
{
    free(w->p);
    memset(w, 0, sizeof *w);
}

void gw_bytes(struct gw *w, const void *p, size_t n)
{
    if (n > w->cap - w->len) {
        size_t ncap = w->cap ? w->cap : 256;
        while (n > ncap - w->len)
            ncap *= 2;
        uint8_t *np = realloc(w->p, ncap);
        if (!np)
            abort();
        w->p = np;
        w->cap = ncap;
    }
    if (n > 0)
        memcpy(w->p + w->len, p, n);
    w->len += n;
}

static void put_le(struct gw *w, uint64_t v, unsigned n)
{
    uint8_t b[8];
    for (unsigned i = 0; i < n; i++)
        b[i] = (uint8_t)(v >> (8 * i));
    gw_bytes(w, b, n);
}

void gw_u8(struct gw *w, uint8_t v)
{
    gw_bytes(w, &v, 1);
}
void gw_u16(struct gw *w, uint16_t v)
{
    put_le(w, v, 2);
}
void gw_u32(struct gw *w, uint32_t v)
{
    put_le(w, v, 4);
}
void gw_u64(struct gw *w, uint64_t v)
{
    put_le(w, v, 8);
}

void gw_str(struct gw *w, const char *s)
{
    size_t n = strlen(s);
    if (w->v1)
        gw_u32(w, (uint32_t)n);
    else
        gw_u64(w, n);
    gw_bytes(w, s, n);
}

void gw_header(struct gw *w, uint32_t version)
{
    gw_bytes(w, "GGUF", 4);
    gw_u32(w, version);
    w->v1 = version == 1;
    w->counts_at = w->len;
    if (w->v1) {
        gw_u32(w, 0);
        gw_u32(w, 0);
    } else {
        gw_u64(w, 0);
        gw_u64(w, 0);
    }
}

void gw_kv(struct gw *w, const char *key, uint32_t type)
{
    gw_str(w, key);
    gw_u32(w, type);
    w->n_kv++;
}

void gw_kv_u32(struct gw *w, const char *key, uint32_t v)
{
    gw_kv(w, key, BATON_GGUF_U32);
    gw_u32(w, v);
}

void gw_kv_f32(struct gw *w, const char *key, float v)
{
    uint32_t bits;
    memcpy(&bits, &v, sizeof bits);
    gw_kv(w, key, BATON_GGUF_F32);
    gw_u32(w, bits);
}

void gw_kv_bool(struct gw *w, const char *key, int v)
{
    gw_kv(w, key, BATON_GGUF_BOOL);
    gw_u8(w, v ? 1 : 0);
}

void gw_kv_str(struct gw *w, const char *key, const char *v)
{
    gw_kv(w, key, BATON_GGUF_STRING);
    gw_str(w, v);
}

void gw_kv_array(struct gw *w, const char *key, uint32_t elem_type, uint64_t count)
{
    gw_kv(w, key, BATON_GGUF_ARRAY);
    gw_u32(w, elem_type);
    if (w->v1)
        gw_u32(w, (uint32_t)count);
    else
        gw_u64(w, count);
}

void gw_tensor_info(struct gw *w, const char *name, uint32_t n_dims, const uint64_t *ne,
                    uint32_t type, uint64_t offset)
{
    gw_str(w, name);
    gw_u32(w, n_dims);
    for (uint32_t i = 0; i < n_dims; i++)
        gw_u64(w, ne[i]);
    gw_u32(w, type);
    gw_u64(w, offset);
    w->n_tensors++;
}

size_t gw_data_begin(struct gw *w, uint32_t align)
{
    static const uint8_t zero[64];
    while (align > 0 && w->len % align != 0) {
        size_t k = align - w->len % align;
        gw_bytes(w, zero, k < sizeof zero ? k : sizeof zero);
    }
    return w->len;
}

void gw_pad_to(struct gw *w, size_t data_start, uint64_t offset)
{
    static const uint8_t zero[64];
    while (w->len - data_start < offset) {
        uint64_t k = offset - (w->len - data_start);
        gw_bytes(w, zero, k < sizeof zero ? (size_t)k : sizeof zero);
    }
}

void gw_finish(struct gw *w)
{
    uint8_t *p = w->p + w->counts_at;
    unsigned n = w->v1 ? 4 : 8;
    for (unsigned i = 0; i < n; i++) {
        p[i] = (uint8_t)((uint64_t)w->n_tensors >> (8 * i));
        p[n + i] = (uint8_t)((uint64_t)w->n_kv >> (8 * i));
    }
}

void gw_vocab_gguf(struct gw *w, const char *const *extra, size_t n_extra)
{
    uint64_t n = 3 + 256 + n_extra;
    char piece[16];
    gw_header(w, 3);
    gw_kv_str(w, "general.architecture", "llama");
    gw_kv_str(w, "tokenizer.ggml.model", "llama");
    gw_kv_array(w, "tokenizer.ggml.tokens", BATON_GGUF_STRING, n);
    gw_str(w, "<unk>");
    gw_str(w, "<s>");
    gw_str(w, "</s>");
    for (unsigned b = 0; b < 256; b++) {
        snprintf(piece, sizeof piece, "<0x%02X>", b);
        gw_str(w, piece);
    }
    for (size_t i = 0; i < n_extra; i++)
        gw_str(w, extra[i]);
    gw_kv_array(w, "tokenizer.ggml.scores", BATON_GGUF_F32, n);
    for (uint64_t i = 0; i < n; i++) {
        float s = i < 3 + 256 ? 0.0f : -(float)(i - 3 - 256);
        uint32_t bits;
        memcpy(&bits, &s, sizeof bits);
        gw_u32(w, bits);
    }
    gw_kv_array(w, "tokenizer.ggml.token_type", BATON_GGUF_I32, n);
    for (uint64_t i = 0; i < n; i++)
        gw_u32(w, i == 0   ? BATON_TOKEN_UNKNOWN
                  : i < 3  ? BATON_TOKEN_CONTROL
                  : i < 259 ? BATON_TOKEN_BYTE
                            : BATON_TOKEN_NORMAL);
    gw_kv_u32(w, "tokenizer.ggml.bos_token_id", 1);
    gw_kv_u32(w, "tokenizer.ggml.eos_token_id", 2);
    gw_kv_u32(w, "tokenizer.ggml.unknown_token_id", 0);
    gw_kv_bool(w, "tokenizer.ggml.add_bos_token", 1);
    gw_finish(w);
}
