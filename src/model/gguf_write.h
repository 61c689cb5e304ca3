/* GGUF v3 writer, for `baton gen-model` and `baton quantize`.
 *
 * Format: ggml's docs/gguf.md (the same layout src/model/gguf.h reads).
 * Metadata pairs and tensors are collected in memory in the order they are
 * added, then written in one go to a temporary file beside the target and
 * renamed over it, so a reader never sees a half-written model. Alignment
 * is the GGUF default, 32 bytes (no general.alignment key is written).
 *
 * Errors: 0 or a negative enum baton_status (BATON_E_NOMEM, BATON_E_INVAL for
 * a bad argument, BATON_E_IO with a message for file errors).
 * Ownership: the writer copies keys, names, values and tensor data, except
 * the data given to baton_gguf_w_tensor_ref, which it borrows.
 */
#ifndef BATON_MODEL_GGUF_WRITE_H
#define BATON_MODEL_GGUF_WRITE_H

#include <stddef.h>
#include <stdint.h>

struct baton_gguf_writer;

int baton_gguf_writer_create(struct baton_gguf_writer **out);
void baton_gguf_writer_free(struct baton_gguf_writer *w);

int baton_gguf_w_u32(struct baton_gguf_writer *w, const char *key, uint32_t v);
int baton_gguf_w_f32(struct baton_gguf_writer *w, const char *key, float v);
int baton_gguf_w_bool(struct baton_gguf_writer *w, const char *key, int v);
int baton_gguf_w_string(struct baton_gguf_writer *w, const char *key, const char *s, size_t len);
/* A value copied verbatim: type is the GGUF value type, raw the bytes that
 * follow the type field (see baton_gguf_kv_raw). */
int baton_gguf_w_raw(struct baton_gguf_writer *w, const char *key, uint32_t type, const void *raw,
                     size_t len);
int baton_gguf_w_f32_array(struct baton_gguf_writer *w, const char *key, const float *v, size_t n);
int baton_gguf_w_i32_array(struct baton_gguf_writer *w, const char *key, const int32_t *v, size_t n);
/* String array: strs[i] of lens[i] bytes. */
int baton_gguf_w_str_array(struct baton_gguf_writer *w, const char *key, const char *const *strs,
                           const size_t *lens, size_t n);

/* Adds a tensor (n_dims 1..4, ne[i] for i < n_dims; nbytes must equal the
 * size that type and ne give). The data is copied. */
int baton_gguf_w_tensor(struct baton_gguf_writer *w, const char *name, uint32_t type,
                        uint32_t n_dims, const uint64_t *ne, const void *data, uint64_t nbytes);

/* Adds a tensor as baton_gguf_w_tensor does, with nbytes of uninitialized
 * data that the writer owns: *data, for the caller to fill before
 * baton_gguf_writer_write (a conversion writes its output there, with no
 * copy of its own). */
int baton_gguf_w_tensor_alloc(struct baton_gguf_writer *w, const char *name, uint32_t type,
                              uint32_t n_dims, const uint64_t *ne, uint64_t nbytes, void **data);

/* Adds a tensor whose data is NOT copied: data stays the caller's and must
 * stay valid and unchanged until the writer is freed (a tensor copied from
 * a mapped input file costs no memory of its own). */
int baton_gguf_w_tensor_ref(struct baton_gguf_writer *w, const char *name, uint32_t type,
                            uint32_t n_dims, const uint64_t *ne, const void *data,
                            uint64_t nbytes);

/* The temporary file baton_gguf_writer_write writes before it renames it
 * onto path: "PATH.tmp.PID" into tmp[0..len). Returns 0, or -1 when it
 * does not fit (the path is too long). */
int baton_gguf_tmp_path(const char *path, char *tmp, size_t len);

/* Writes the file (temporary file + rename). err gets a message naming the
 * path on failure. */
int baton_gguf_writer_write(struct baton_gguf_writer *w, const char *path, char *err,
                            size_t err_len);

#endif
