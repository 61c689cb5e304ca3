/* GGUF reader: a read-only, bounds-checked view of a GGUF v3 (or v2) file.
 *
 * Format: ggml's docs/gguf.md (github.com/ggml-org/ggml). All fields are
 * little-endian:
 *
 *   header   magic "GGUF" (4 bytes), u32 version, u64 n_tensors, u64 n_kv
 *   n_kv     metadata pairs: string key, u32 value type, value
 *   n_tensors tensor infos: string name, u32 n_dims, u64 ne[n_dims],
 *            u32 ggml type, u64 offset (relative to the data section)
 *   padding  up to a multiple of general.alignment (default 32)
 *   data     tensor data; each tensor's offset is a multiple of the alignment
 *
 * where string = u64 length + that many bytes (no NUL), and an array value is
 * u32 element type + u64 count + the elements. Nested arrays (an array whose
 * element type is ARRAY) are rejected; ggml's own reader rejects them too.
 *
 * Everything read from the file is checked before use: counts and lengths
 * against the named limits below and against the bytes that remain (range
 * checks subtract, never add), tensor types against core/types.h, ne[0]
 * against the type's block size, the byte size of each tensor with checked
 * multiplication, and each tensor's data range against the file size.
 * Keys and tensor names must be unique, non-empty and free of NUL bytes.
 * No two tensors' data ranges [offset, offset + nbytes) may share a byte
 * (an empty tensor holds none); the tensors may lie in any order.
 * Version 1 (u32 counts) and big-endian files are rejected.
 *
 * Errors: every function that can fail returns 0 or a negative enum
 * baton_status. The open functions also write a one-line message that names
 * the file and the field (keys and tensor names escaped by baton_gguf_escape
 * below), e.g.
 *   "model.gguf: tensor 3 'blk.0.attn_q.weight': data past end of file".
 * Codes used: BATON_E_IO (open/stat/mmap), BATON_E_NOMEM, BATON_E_TRUNCATED
 * (a field runs past the end of the file), BATON_E_FORMAT (bad magic,
 * version, value type, alignment, bool, duplicate, misaligned offset,
 * overlapping tensor data, ...),
 * BATON_E_LIMIT (a count or length above a limit below), BATON_E_TYPE
 * (unknown tensor type), BATON_E_SHAPE (ne[0] not a multiple of the block
 * size), BATON_E_OVERFLOW (element count or byte size does not fit in 63
 * bits), BATON_E_BOUNDS (tensor data outside the file).
 *
 * Ownership and lifetime: a struct baton_gguf owns its mapping (or borrows
 * the caller's buffer, see baton_gguf_open_buffer) and every pointer handed
 * out by the functions below points into that mapping or into memory owned
 * by the struct: they are valid until baton_gguf_close(). Strings from the
 * file (string values) are NOT NUL-terminated: use the returned length. Key
 * and tensor name strings ARE NUL-terminated (copies owned by the struct).
 *
 * Threads: after open, every function is read-only and may be called from
 * several threads at once.
 *
 * Data alignment: in a mapped file, tensor data is aligned to
 * min(alignment, page size). In a caller's buffer it is aligned only as well
 * as the buffer is; read elements with memcpy when in doubt.
 * A mapped file that another process truncates while it is open raises
 * SIGBUS on access, as with any mmap.
 */
#ifndef BATON_MODEL_GGUF_H
#define BATON_MODEL_GGUF_H

#include <stddef.h>
#include <stdint.h>

#include "core/types.h"

/* Limits checked before any allocation or arithmetic. Each one is far above
 * what llama.cpp's converters write for current models. */
#define BATON_GGUF_MAX_KV 65536u               /* metadata pairs */
#define BATON_GGUF_MAX_TENSORS (1u << 20)      /* tensor infos */
#define BATON_GGUF_MAX_KEY_BYTES 1024u         /* one key */
#define BATON_GGUF_MAX_NAME_BYTES 255u         /* one tensor name (ggml: 63) */
#define BATON_GGUF_MAX_STRING_BYTES (1u << 20) /* one string value or element */
#define BATON_GGUF_MAX_ARRAY_ELEMS (1u << 24)  /* elements of one array */
#define BATON_GGUF_DEFAULT_ALIGNMENT 32u
#define BATON_GGUF_MAX_ALIGNMENT (1u << 20) /* largest general.alignment accepted */
#define BATON_GGUF_MIN_VERSION 2u
#define BATON_GGUF_MAX_VERSION 3u

/* Metadata value types (gguf.md, "gguf_metadata_value_type"). */
enum baton_gguf_type {
    BATON_GGUF_U8 = 0,
    BATON_GGUF_I8 = 1,
    BATON_GGUF_U16 = 2,
    BATON_GGUF_I16 = 3,
    BATON_GGUF_U32 = 4,
    BATON_GGUF_I32 = 5,
    BATON_GGUF_F32 = 6,
    BATON_GGUF_BOOL = 7,
    BATON_GGUF_STRING = 8,
    BATON_GGUF_ARRAY = 9,
    BATON_GGUF_U64 = 10,
    BATON_GGUF_I64 = 11,
    BATON_GGUF_F64 = 12,
    BATON_GGUF_TYPE_COUNT = 13
};

struct baton_gguf;    /* an open file; opaque */
struct baton_gguf_kv; /* one metadata pair inside it; opaque */

/* One scalar value (a scalar key's value or one array element), decoded.
 * Exactly one member of the union is meaningful, chosen by type:
 *   U8, U16, U32, U64, BOOL (0 or 1)  -> u
 *   I8, I16, I32, I64                 -> i
 *   F32, F64                          -> f (F32 widened exactly)
 *   STRING                            -> str.ptr / str.len (not NUL-terminated)
 * ARRAY never appears here. */
struct baton_gguf_scalar {
    uint32_t type; /* enum baton_gguf_type */
    union {
        uint64_t u;
        int64_t i;
        double f;
        struct {
            const char *ptr;
            size_t len;
        } str;
    } v;
};

/* One tensor info, resolved. */
struct baton_gguf_tensor {
    const char *name;            /* NUL-terminated, owned by the struct baton_gguf */
    uint32_t type;               /* ggml type id, known to core/types.h */
    uint32_t n_dims;             /* 0..4 as stored in the file */
    uint64_t ne[BATON_MAX_DIMS]; /* elements per dimension; 1 beyond n_dims */
    uint64_t offset;             /* bytes from the start of the data section */
    uint64_t file_offset;        /* bytes from the start of the file */
    uint64_t nbytes;             /* data size, from type and ne */
    const void *data;            /* file_offset bytes into the map; nbytes long */
};

/* Opens and validates the GGUF file at path: open(O_RDONLY|O_CLOEXEC),
 * fstat (must be a regular, non-empty file), mmap(PROT_READ, MAP_PRIVATE),
 * close. On success *out owns the mapping; free it with baton_gguf_close().
 * On failure *out is NULL and err (if err_len > 0) holds a NUL-terminated
 * message naming path and the field. */
int baton_gguf_open(const char *path, struct baton_gguf **out, char *err, size_t err_len);

/* Same, over len bytes at data, which the caller keeps alive and unchanged
 * until baton_gguf_close() (nothing is copied). name (or "<memory>" when
 * NULL) is used in error messages. Used by tests and fuzz harnesses. */
int baton_gguf_open_buffer(const void *data, size_t len, const char *name, struct baton_gguf **out,
                           char *err, size_t err_len);

/* Frees g and unmaps its file (a borrowed buffer is left alone). NULL is a
 * no-op. */
void baton_gguf_close(struct baton_gguf *g);

/* File-level facts. */
uint32_t baton_gguf_version(const struct baton_gguf *g);     /* 2 or 3 */
uint32_t baton_gguf_alignment(const struct baton_gguf *g);   /* power of 2 */
/* Start of the data section, from the file's start. For a file without
 * tensors it may lie past the end of the file (nothing is read there). */
uint64_t baton_gguf_data_offset(const struct baton_gguf *g);
uint64_t baton_gguf_file_size(const struct baton_gguf *g);   /* bytes */
const void *baton_gguf_base(const struct baton_gguf *g);     /* first byte of the file */

/* ---- metadata ---- */

/* Number of metadata pairs, and pair i (0 <= i < n) in file order; NULL if
 * i is out of range. */
uint64_t baton_gguf_n_kv(const struct baton_gguf *g);
const struct baton_gguf_kv *baton_gguf_kv_at(const struct baton_gguf *g, uint64_t i);

/* Finds a key by exact byte match (O(log n_kv)). NULL if absent. */
const struct baton_gguf_kv *baton_gguf_find_key(const struct baton_gguf *g, const char *key);

/* The key (NUL-terminated) and value type (enum baton_gguf_type) of a pair. */
const char *baton_gguf_kv_key(const struct baton_gguf_kv *kv);
uint32_t baton_gguf_kv_type(const struct baton_gguf_kv *kv);

/* Decodes a scalar pair's value. BATON_E_TYPE if the pair is an array. */
int baton_gguf_kv_scalar(const struct baton_gguf_kv *kv, struct baton_gguf_scalar *out);

/* Typed getters. *_u32 accepts any integer type (not bool) whose value lies
 * in 0..UINT32_MAX; *_f32 accepts F32 and F64 (rounded to float). Errors:
 * BATON_E_TYPE for another value type, BATON_E_BOUNDS for an integer out of
 * range. The string is a pointer + length into the file, not NUL-terminated. */
int baton_gguf_kv_u32(const struct baton_gguf_kv *kv, uint32_t *out);
int baton_gguf_kv_f32(const struct baton_gguf_kv *kv, float *out);
int baton_gguf_kv_bool(const struct baton_gguf_kv *kv, int *out);
int baton_gguf_kv_string(const struct baton_gguf_kv *kv, const char **ptr, size_t *len);

/* The value's bytes exactly as stored after the pair's u32 value type:
 * a scalar's bytes, a string's u64 length and bytes, or an array's u32
 * element type, u64 count and elements. Points into the file; used to copy
 * metadata unchanged (baton quantize). */
int baton_gguf_kv_raw(const struct baton_gguf_kv *kv, const void **ptr, size_t *len);

/* Array pairs: element type and count. BATON_E_TYPE if not an array. */
int baton_gguf_kv_array(const struct baton_gguf_kv *kv, uint32_t *elem_type, uint64_t *count);

/* Element i of an array pair. BATON_E_TYPE if kv is not an array (or, for
 * the typed forms, its element type does not fit: *_i32 accepts any integer
 * element type with a value in INT32_MIN..INT32_MAX, *_f32 accepts F32 and
 * F64); BATON_E_BOUNDS if i >= count or an integer does not fit. Strings
 * point into the file, not NUL-terminated. O(1) for every element type. */
int baton_gguf_arr_get(const struct baton_gguf_kv *kv, uint64_t i, struct baton_gguf_scalar *out);
int baton_gguf_arr_string(const struct baton_gguf_kv *kv, uint64_t i, const char **ptr,
                          size_t *len);
int baton_gguf_arr_f32(const struct baton_gguf_kv *kv, uint64_t i, float *out);
int baton_gguf_arr_i32(const struct baton_gguf_kv *kv, uint64_t i, int32_t *out);

/* Shorthands: find_key + the typed getter; BATON_E_NOT_FOUND if the key is
 * absent (outputs untouched), so callers can apply a default. */
int baton_gguf_get_u32(const struct baton_gguf *g, const char *key, uint32_t *out);
int baton_gguf_get_f32(const struct baton_gguf *g, const char *key, float *out);
int baton_gguf_get_bool(const struct baton_gguf *g, const char *key, int *out);
int baton_gguf_get_string(const struct baton_gguf *g, const char *key, const char **ptr,
                          size_t *len);

/* Name of a value type ("u32", "string", ...), "?" if unknown. Never NULL. */
const char *baton_gguf_type_name(uint32_t type);

/* ---- strings from the file, for messages ---- */

/* Writes len bytes of s (a key, tensor name or string value: anything from
 * a model file) into dst as text that cannot drive a terminal, for every
 * message that quotes such a string: printable ASCII and valid UTF-8 pass
 * as they are; a backslash becomes \\; C0 controls, DEL and each byte that
 * is not part of valid UTF-8 (raw 0x80..0x9f, the C1 controls of an 8-bit
 * terminal, among them) become \xNN; the C1 controls U+0080..U+009F in
 * UTF-8 (U+009B is CSI) become \xc2\xNN. A string whose escaped form does
 * not fit in cap - 1 bytes is cut before a whole character or escape and
 * ends with "..." (cap >= 4). dst is always NUL-terminated when cap > 0;
 * reads at most cap + 3 bytes of s. Returns dst. */
const char *baton_gguf_escape(char *dst, size_t cap, const void *s, size_t len);

/* Length of the valid UTF-8 sequence (RFC 3629: no overlong form, no
 * surrogate, at most U+10FFFF) that starts s[0..n), or 0 (also for n 0). */
size_t baton_gguf_utf8_len(const void *s, size_t n);

/* ---- tensors ---- */

/* Number of tensors; tensor i (0 <= i < n, file order) into *out.
 * BATON_E_BOUNDS if i is out of range. */
uint64_t baton_gguf_n_tensors(const struct baton_gguf *g);
int baton_gguf_tensor_at(const struct baton_gguf *g, uint64_t i, struct baton_gguf_tensor *out);

/* Finds a tensor by exact name (O(log n_tensors)). BATON_E_NOT_FOUND if
 * absent. If index is not NULL it receives the tensor's file-order index. */
int baton_gguf_find_tensor(const struct baton_gguf *g, const char *name,
                           struct baton_gguf_tensor *out, uint64_t *index);

#endif
