/* A minimal GGUF writer for the fuzz seeds and the tokenizer harness's
 * fallback vocabulary (format: ggml docs/gguf.md, summarised in
 * src/model/gguf.h). It writes exactly what it is told, valid or not, so
 * the corpus generator can also make slightly broken files on purpose.
 *
 * Usage: gw_init, gw_header (counts are patched by gw_finish), key/value
 * pairs (gw_kv_*), tensor infos (gw_tensor_info), then gw_data_begin
 * (padding to the alignment) and the tensor data, then gw_finish.
 * Growth failure aborts: these are test tools.
 */
#ifndef BATON_FUZZ_GGUF_WRITER_H
#define BATON_FUZZ_GGUF_WRITER_H

#include <stddef.h>
#include <stdint.h>

struct gw {
    uint8_t *p;
    size_t len, cap;
    uint32_t n_kv, n_tensors;
    size_t counts_at; /* where n_tensors and n_kv are */
    int v1;           /* version 1: u32 counts and lengths */
};

void gw_init(struct gw *w);
void gw_free(struct gw *w);

void gw_u8(struct gw *w, uint8_t v);
void gw_u16(struct gw *w, uint16_t v);
void gw_u32(struct gw *w, uint32_t v);
void gw_u64(struct gw *w, uint64_t v);
void gw_bytes(struct gw *w, const void *p, size_t n);
void gw_str(struct gw *w, const char *s); /* u64 length + bytes, no NUL */

/* Magic "GGUF", version, then n_tensors and n_kv (fixed by gw_finish). */
void gw_header(struct gw *w, uint32_t version);

/* A pair's key and value type; the value follows (gw_u32, gw_str, ...). */
void gw_kv(struct gw *w, const char *key, uint32_t type);
void gw_kv_u32(struct gw *w, const char *key, uint32_t v);
void gw_kv_f32(struct gw *w, const char *key, float v);
void gw_kv_bool(struct gw *w, const char *key, int v);
void gw_kv_str(struct gw *w, const char *key, const char *v);
/* Array header: element type and count; the elements follow. */
void gw_kv_array(struct gw *w, const char *key, uint32_t elem_type, uint64_t count);

void gw_tensor_info(struct gw *w, const char *name, uint32_t n_dims, const uint64_t *ne,
                    uint32_t type, uint64_t offset);

/* Pads with zeros to a multiple of align; returns the data section's offset. */
size_t gw_data_begin(struct gw *w, uint32_t align);
/* Pads the data section to `offset` bytes from data_start (zeros). */
void gw_pad_to(struct gw *w, size_t data_start, uint64_t offset);

/* Writes the pair and tensor counts into the header. */
void gw_finish(struct gw *w);

/* Builds a complete llama-vocabulary GGUF (no tensors) in w: <unk>, <s>,
 * </s>, the 256 byte tokens <0x00>..<0xFF>, then `n_extra` normal pieces
 * from `extra` (UTF-8, "▁" for a space) with descending scores. */
void gw_vocab_gguf(struct gw *w, const char *const *extra, size_t n_extra);

#endif
