/* GGUF reader (format and checks described in gguf.h; spec: ggml docs/gguf.md).
 *
 * The parse is one forward pass with a cursor over (base, size): a read
 * either takes the bytes it needs or fails with BATON_E_TRUNCATED without
 * moving. Every count is checked against its limit and against the bytes
 * that remain before anything is allocated for it, so allocations stay
 * proportional to the file. Values are not copied: a pair records where its
 * value starts, and string arrays get an offset table for O(1) access.
 */
#include "model/gguf.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "baton/status.h"

#define GGUF_MAGIC_LE 0x46554747u /* "GGUF" read as a little-endian u32 */
#define GGUF_HEADER_BYTES 24u
/* Smallest encodings, used to bound counts by the bytes left. */
#define GGUF_MIN_KV_BYTES 14u /* u64 key length + 1 key byte + u32 type + 1 value byte */
#define GGUF_MIN_TENSOR_BYTES                                                                      \
    25u /* u64 name length + 1 name byte + u32 n_dims + u32 type + u64 offset */

struct baton_gguf_kv {
    const char *key;    /* NUL-terminated, in g->names */
    uint32_t type;      /* enum baton_gguf_type */
    uint32_t elem_type; /* arrays: element type */
    uint64_t count;     /* arrays: element count */
    const uint8_t
        *val; /* scalar: its bytes; string: its bytes after the length; array: first element */
    uint64_t str_len;    /* string value: length */
    uint64_t *elem_offs; /* string arrays: offset from val of element i's length field */
    size_t key_off;      /* offset of key in the names arena while parsing */
};

struct tensor_rec {
    size_t name_off; /* in the names arena */
    uint32_t type;
    uint32_t n_dims;
    uint64_t ne[BATON_MAX_DIMS];
    uint64_t offset;
    uint64_t nbytes;
};

struct name_index {
    const char *name;
    uint64_t idx;
};

struct baton_gguf {
    const uint8_t *base;
    uint64_t size;
    int mapped; /* 1: munmap(base, size) on close */
    uint32_t version;
    uint32_t alignment;
    uint64_t data_offset;
    uint64_t n_kv;
    struct baton_gguf_kv *kvs;
    struct name_index *kv_sorted;
    uint64_t n_tensors;
    struct tensor_rec *tensors;
    struct name_index *t_sorted;
    char *names; /* arena of NUL-terminated keys and tensor names */
    size_t names_len;
    size_t names_cap;
};

/* ---- cursor ---- */

struct cursor {
    const uint8_t *base;
    uint64_t size;
    uint64_t off; /* invariant: off <= size */
};

static int take(struct cursor *c, uint64_t n, const uint8_t **out)
{
    if (n > c->size - c->off)
        return BATON_E_TRUNCATED;
    *out = c->base + c->off;
    c->off += n;
    return 0;
}

static uint64_t le(const uint8_t *b, unsigned n)
{
    uint64_t v = 0;
    for (unsigned i = n; i > 0; i--)
        v = (v << 8) | b[i - 1];
    return v;
}

static int rd_u32(struct cursor *c, uint32_t *v)
{
    const uint8_t *b;
    int st = take(c, 4, &b);
    if (st == 0)
        *v = (uint32_t)le(b, 4);
    return st;
}

static int rd_u64(struct cursor *c, uint64_t *v)
{
    const uint8_t *b;
    int st = take(c, 8, &b);
    if (st == 0)
        *v = le(b, 8);
    return st;
}

static int mul_u64(uint64_t a, uint64_t b, uint64_t *r)
{
    if (a != 0 && b > UINT64_MAX / a)
        return BATON_E_OVERFLOW;
    *r = a * b;
    return 0;
}

/* ---- errors ---- */

struct parse {
    struct baton_gguf *g;
    struct cursor c;
    const char *file;
    char *err;
    size_t err_len;
    char where[160]; /* "key 'general.name'", "tensor 3 'x'", ... */
};

/* gguf.h */
size_t baton_gguf_utf8_len(const void *p, size_t n)
{
    const uint8_t *s = p;
    size_t len;
    if (n == 0)
        return 0;
    if (s[0] < 0x80)
        return 1;
    if (s[0] >= 0xc2 && s[0] <= 0xdf)
        len = 2;
    else if (s[0] >= 0xe0 && s[0] <= 0xef)
        len = 3;
    else if (s[0] >= 0xf0 && s[0] <= 0xf4)
        len = 4;
    else
        return 0; /* a continuation byte, an overlong lead (C0, C1) or past U+10FFFF */
    if (len > n)
        return 0;
    for (size_t i = 1; i < len; i++)
        if ((s[i] & 0xc0) != 0x80)
            return 0;
    if ((s[0] == 0xe0 && s[1] < 0xa0) || (s[0] == 0xed && s[1] >= 0xa0) ||
        (s[0] == 0xf0 && s[1] < 0x90) || (s[0] == 0xf4 && s[1] >= 0x90))
        return 0; /* overlong, surrogate, above U+10FFFF */
    return len;
}

/* The escaped form of the character or byte at s[0..n) (n >= 1) into unit
 * (at most 8 bytes, not terminated): its length in *unit_len; returns the
 * bytes of s it stands for. */
static size_t escape_unit(const uint8_t *s, size_t n, char unit[8], size_t *unit_len)
{
    static const char hex[] = "0123456789abcdef";
    size_t l;
    if (s[0] == '\\') {
        memcpy(unit, "\\\\", 2);
        *unit_len = 2;
        return 1;
    }
    if (s[0] >= 0x20 && s[0] < 0x7f) {
        unit[0] = (char)s[0];
        *unit_len = 1;
        return 1;
    }
    l = s[0] < 0x80 ? 0 : baton_gguf_utf8_len(s, n); /* C0 and DEL: 0 */
    if (l == 2 && s[0] == 0xc2 && s[1] < 0xa0) {
        /* a C1 control, U+0080..U+009F (U+009B is CSI, which terminals act on) */
        memcpy(unit, "\\xc2\\x", 6);
        unit[6] = hex[s[1] >> 4];
        unit[7] = hex[s[1] & 0xf];
        *unit_len = 8;
        return 2;
    }
    if (l == 0) {
        /* C0, DEL, or a byte that is not part of valid UTF-8 (0x80..0x9f
         * among them: C1 controls to a terminal that reads 8-bit bytes) */
        unit[0] = '\\';
        unit[1] = 'x';
        unit[2] = hex[s[0] >> 4];
        unit[3] = hex[s[0] & 0xf];
        *unit_len = 4;
        return 1;
    }
    memcpy(unit, s, l);
    *unit_len = l;
    return l;
}

/* gguf.h */
const char *baton_gguf_escape(char *dst, size_t cap, const void *src, size_t len)
{
    const uint8_t *s = src;
    char unit[8];
    size_t unit_len, need = 0, room, n = 0, i;
    if (cap == 0)
        return dst;
    /* the escaped length, counted only as far as cap: a string that fits
     * is written whole; one that does not is cut to leave room for "..." */
    for (i = 0; i < len && need < cap;) {
        i += escape_unit(s + i, len - i, unit, &unit_len);
        need += unit_len;
    }
    room = need < cap ? cap - 1 : (cap > 4 ? cap - 4 : 0);
    for (i = 0; i < len;) {
        size_t took = escape_unit(s + i, len - i, unit, &unit_len);
        if (unit_len > room - n)
            break;
        memcpy(dst + n, unit, unit_len);
        n += unit_len;
        i += took;
    }
    if (i < len && cap >= 4) {
        memcpy(dst + n, "...", 3); /* n <= cap - 4 when cut */
        n += 3;
    }
    dst[n] = '\0';
    return dst;
}

__attribute__((format(printf, 3, 4))) static int fail(struct parse *ps, int st, const char *fmt,
                                                      ...)
{
    if (ps->err == NULL || ps->err_len == 0)
        return st;
    char what[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    if (ps->where[0] != '\0')
        snprintf(ps->err, ps->err_len, "%s: %s: %s", ps->file, ps->where, what);
    else
        snprintf(ps->err, ps->err_len, "%s: %s", ps->file, what);
    return st;
}

/* ---- value types ---- */

static const char *const type_names[BATON_GGUF_TYPE_COUNT] = {
    "u8", "i8", "u16", "i16", "u32", "i32", "f32", "bool", "string", "array", "u64", "i64", "f64",
};

const char *baton_gguf_type_name(uint32_t type)
{
    return type < BATON_GGUF_TYPE_COUNT ? type_names[type] : "?";
}

/* Bytes of a fixed-size value type; 0 for string, array and unknown. */
static unsigned fixed_size(uint32_t type)
{
    switch (type) {
    case BATON_GGUF_U8:
    case BATON_GGUF_I8:
    case BATON_GGUF_BOOL:
        return 1;
    case BATON_GGUF_U16:
    case BATON_GGUF_I16:
        return 2;
    case BATON_GGUF_U32:
    case BATON_GGUF_I32:
    case BATON_GGUF_F32:
        return 4;
    case BATON_GGUF_U64:
    case BATON_GGUF_I64:
    case BATON_GGUF_F64:
        return 8;
    default:
        return 0;
    }
}

/* Decodes a validated scalar of a known type at b. */
static void decode_scalar(uint32_t type, const uint8_t *b, struct baton_gguf_scalar *out)
{
    out->type = type;
    switch (type) {
    case BATON_GGUF_U8:
    case BATON_GGUF_BOOL:
        out->v.u = b[0];
        break;
    case BATON_GGUF_I8:
        out->v.i = (int8_t)b[0];
        break;
    case BATON_GGUF_U16:
        out->v.u = le(b, 2);
        break;
    case BATON_GGUF_I16:
        out->v.i = (int16_t)(uint16_t)le(b, 2);
        break;
    case BATON_GGUF_U32:
        out->v.u = le(b, 4);
        break;
    case BATON_GGUF_I32:
        out->v.i = (int32_t)(uint32_t)le(b, 4);
        break;
    case BATON_GGUF_U64:
        out->v.u = le(b, 8);
        break;
    case BATON_GGUF_I64:
        out->v.i = (int64_t)le(b, 8);
        break;
    case BATON_GGUF_F32: {
        uint32_t bits = (uint32_t)le(b, 4);
        float f;
        memcpy(&f, &bits, sizeof f);
        out->v.f = f;
        break;
    }
    case BATON_GGUF_F64: {
        uint64_t bits = le(b, 8);
        memcpy(&out->v.f, &bits, sizeof out->v.f);
        break;
    }
    default: /* STRING: b points at the u64 length, validated at parse time */
        out->v.str.len = (size_t)le(b, 8);
        out->v.str.ptr = (const char *)b + 8;
        break;
    }
}

/* ---- names arena ---- */

/* Appends a NUL-terminated copy of len bytes to the arena; *off receives its
 * offset (pointers are fixed after the parse, when the arena stops moving). */
static int arena_add(struct baton_gguf *g, const uint8_t *s, uint64_t len, size_t *off)
{
    /* len is bounded by BATON_GGUF_MAX_KEY_BYTES; the arena by the file size. */
    size_t need = (size_t)len + 1;
    if (need > g->names_cap - g->names_len) {
        size_t cap = g->names_cap ? g->names_cap : 4096;
        while (need > cap - g->names_len) {
            if (cap > SIZE_MAX / 2)
                return BATON_E_NOMEM;
            cap *= 2;
        }
        char *p = realloc(g->names, cap);
        if (p == NULL)
            return BATON_E_NOMEM;
        g->names = p;
        g->names_cap = cap;
    }
    memcpy(g->names + g->names_len, s, (size_t)len);
    g->names[g->names_len + len] = '\0';
    *off = g->names_len;
    g->names_len += need;
    return 0;
}

/* Reads a GGUF string as a name (key or tensor name): length 1..max, no NUL. */
static int read_name(struct parse *ps, uint64_t max, const char *what, const uint8_t **s,
                     uint64_t *len)
{
    int st = rd_u64(&ps->c, len);
    if (st != 0)
        return fail(ps, st, "%s length truncated", what);
    if (*len == 0)
        return fail(ps, BATON_E_FORMAT, "empty %s", what);
    if (*len > max)
        return fail(ps, BATON_E_LIMIT, "%s length %llu over limit %llu", what,
                    (unsigned long long)*len, (unsigned long long)max);
    st = take(&ps->c, *len, s);
    if (st != 0)
        return fail(ps, st, "%s of %llu bytes runs past end of file", what,
                    (unsigned long long)*len);
    if (memchr(*s, 0, (size_t)*len) != NULL)
        return fail(ps, BATON_E_FORMAT, "%s contains a NUL byte", what);
    return 0;
}

/* Reads one string value (length <= BATON_GGUF_MAX_STRING_BYTES); elem is
 * the array index for messages, or UINT64_MAX for a scalar. */
static int read_string(struct parse *ps, uint64_t elem, uint64_t *len)
{
    char at[48] = "";
    if (elem != UINT64_MAX)
        snprintf(at, sizeof at, "element %llu: ", (unsigned long long)elem);
    const uint8_t *s;
    int st = rd_u64(&ps->c, len);
    if (st != 0)
        return fail(ps, st, "%sstring length truncated", at);
    if (*len > BATON_GGUF_MAX_STRING_BYTES)
        return fail(ps, BATON_E_LIMIT, "%sstring length %llu over limit %u", at,
                    (unsigned long long)*len, BATON_GGUF_MAX_STRING_BYTES);
    st = take(&ps->c, *len, &s);
    if (st != 0)
        return fail(ps, st, "%sstring of %llu bytes runs past end of file", at,
                    (unsigned long long)*len);
    return 0;
}

static int read_array(struct parse *ps, struct baton_gguf_kv *kv)
{
    int st = rd_u32(&ps->c, &kv->elem_type);
    if (st != 0)
        return fail(ps, st, "array element type truncated");
    if (kv->elem_type == BATON_GGUF_ARRAY)
        return fail(ps, BATON_E_FORMAT, "nested arrays are not supported");
    if (kv->elem_type >= BATON_GGUF_TYPE_COUNT)
        return fail(ps, BATON_E_FORMAT, "unknown array element type %u", kv->elem_type);
    st = rd_u64(&ps->c, &kv->count);
    if (st != 0)
        return fail(ps, st, "array count truncated");
    if (kv->count > BATON_GGUF_MAX_ARRAY_ELEMS)
        return fail(ps, BATON_E_LIMIT, "array count %llu over limit %u",
                    (unsigned long long)kv->count, BATON_GGUF_MAX_ARRAY_ELEMS);
    kv->val = ps->c.base + ps->c.off;
    const uint64_t left = ps->c.size - ps->c.off;
    const unsigned esize = fixed_size(kv->elem_type);
    if (esize != 0) {
        const uint8_t *b;
        /* count <= 2^24 and esize <= 8: the product cannot wrap. */
        st = take(&ps->c, kv->count * esize, &b);
        if (st != 0)
            return fail(ps, st, "array of %llu %s runs past end of file",
                        (unsigned long long)kv->count, type_names[kv->elem_type]);
        if (kv->elem_type == BATON_GGUF_BOOL) {
            for (uint64_t i = 0; i < kv->count; i++)
                if (b[i] > 1)
                    return fail(ps, BATON_E_FORMAT, "element %llu: bool value %u is not 0 or 1",
                                (unsigned long long)i, b[i]);
        }
        return 0;
    }
    /* Strings: each takes at least its 8-byte length, so a count the file
     * cannot hold fails here, before the offset table is allocated. */
    if (kv->count > left / 8)
        return fail(ps, BATON_E_TRUNCATED, "array of %llu strings runs past end of file",
                    (unsigned long long)kv->count);
    if (kv->count > 0) {
        kv->elem_offs = malloc((size_t)kv->count * sizeof *kv->elem_offs);
        if (kv->elem_offs == NULL)
            return fail(ps, BATON_E_NOMEM, "out of memory for %llu strings",
                        (unsigned long long)kv->count);
    }
    const uint64_t start = ps->c.off;
    for (uint64_t i = 0; i < kv->count; i++) {
        uint64_t len;
        kv->elem_offs[i] = ps->c.off - start;
        st = read_string(ps, i, &len);
        if (st != 0)
            return st;
    }
    return 0;
}

static int read_kv(struct parse *ps, uint64_t i, struct baton_gguf_kv *kv)
{
    const uint8_t *key;
    uint64_t key_len;
    snprintf(ps->where, sizeof ps->where, "key %llu", (unsigned long long)i);
    int st = read_name(ps, BATON_GGUF_MAX_KEY_BYTES, "key", &key, &key_len);
    if (st != 0)
        return st;
    char shown[80];
    baton_gguf_escape(shown, sizeof shown, key, (size_t)key_len);
    snprintf(ps->where, sizeof ps->where, "key '%s'", shown);
    st = arena_add(ps->g, key, key_len, &kv->key_off);
    if (st != 0)
        return fail(ps, st, "out of memory");
    st = rd_u32(&ps->c, &kv->type);
    if (st != 0)
        return fail(ps, st, "value type truncated");
    if (kv->type >= BATON_GGUF_TYPE_COUNT)
        return fail(ps, BATON_E_FORMAT, "unknown value type %u", kv->type);
    kv->val = ps->c.base + ps->c.off;
    if (kv->type == BATON_GGUF_ARRAY)
        return read_array(ps, kv);
    if (kv->type == BATON_GGUF_STRING) {
        st = read_string(ps, UINT64_MAX, &kv->str_len);
        kv->val += 8;
        return st;
    }
    const uint8_t *b;
    st = take(&ps->c, fixed_size(kv->type), &b);
    if (st != 0)
        return fail(ps, st, "%s value truncated", type_names[kv->type]);
    if (kv->type == BATON_GGUF_BOOL && b[0] > 1)
        return fail(ps, BATON_E_FORMAT, "bool value %u is not 0 or 1", b[0]);
    return 0;
}

static int read_tensor_info(struct parse *ps, uint64_t i, struct tensor_rec *t)
{
    const uint8_t *name;
    uint64_t name_len;
    snprintf(ps->where, sizeof ps->where, "tensor %llu", (unsigned long long)i);
    int st = read_name(ps, BATON_GGUF_MAX_NAME_BYTES, "name", &name, &name_len);
    if (st != 0)
        return st;
    char shown[80];
    baton_gguf_escape(shown, sizeof shown, name, (size_t)name_len);
    snprintf(ps->where, sizeof ps->where, "tensor %llu '%s'", (unsigned long long)i, shown);
    st = arena_add(ps->g, name, name_len, &t->name_off);
    if (st != 0)
        return fail(ps, st, "out of memory");
    st = rd_u32(&ps->c, &t->n_dims);
    if (st != 0)
        return fail(ps, st, "n_dims truncated");
    if (t->n_dims > BATON_MAX_DIMS)
        return fail(ps, BATON_E_FORMAT, "n_dims %u over %d", t->n_dims, BATON_MAX_DIMS);
    for (unsigned d = 0; d < BATON_MAX_DIMS; d++) {
        t->ne[d] = 1;
        if (d >= t->n_dims)
            continue;
        st = rd_u64(&ps->c, &t->ne[d]);
        if (st != 0)
            return fail(ps, st, "ne[%u] truncated", d);
        if (t->ne[d] > (uint64_t)INT64_MAX)
            return fail(ps, BATON_E_FORMAT, "ne[%u] is negative", d);
    }
    st = rd_u32(&ps->c, &t->type);
    if (st != 0)
        return fail(ps, st, "type truncated");
    st = rd_u64(&ps->c, &t->offset);
    if (st != 0)
        return fail(ps, st, "offset truncated");

    uint32_t block_elems, block_bytes;
    if (baton_type_block(t->type, &block_elems, &block_bytes) != 0) {
        /* ggml's names of the types baton does not run (ggml.h enum ggml_type) */
        static const char *const ggml_names[] = {
            [3] = "q4_1",     [9] = "q8_1",
            [15] = "q8_k",    [16] = "iq2_xxs", [17] = "iq2_xs", [18] = "iq3_xxs",
            [19] = "iq1_s",   [21] = "iq3_s",  [22] = "iq2_s",
            [24] = "i8",      [25] = "i16",    [27] = "i64",
            [28] = "f64",     [29] = "iq1_m",   [34] = "tq1_0",
            [35] = "tq2_0",   [39] = "mxfp4"};
        const char *nm = t->type < sizeof ggml_names / sizeof ggml_names[0]
                             ? ggml_names[t->type]
                             : NULL;

        if (nm != NULL)
            return fail(ps, BATON_E_TYPE,
                        "tensor type %u (ggml's %s) is not one baton runs (f32, f16, bf16, "
                        "q8_0, q4_0, q5_0, q5_1, q2_k..q6_k, iq4_nl, iq4_xs)",
                        t->type, nm);
        return fail(ps, BATON_E_TYPE, "unknown tensor type %u", t->type);
    }
    if (t->ne[0] % block_elems != 0)
        return fail(ps, BATON_E_SHAPE, "ne[0] %llu is not a multiple of the %s block size %u",
                    (unsigned long long)t->ne[0], baton_type_name(t->type), block_elems);
    uint64_t n_elems = 1;
    uint64_t nbytes;
    if (mul_u64(t->ne[0] / block_elems, block_bytes, &nbytes) != 0)
        return fail(ps, BATON_E_OVERFLOW, "byte size overflows");
    for (unsigned d = 0; d < BATON_MAX_DIMS; d++) {
        if (mul_u64(n_elems, t->ne[d], &n_elems) != 0 || n_elems > (uint64_t)INT64_MAX)
            return fail(ps, BATON_E_OVERFLOW, "element count overflows");
        if (d > 0 && mul_u64(nbytes, t->ne[d], &nbytes) != 0)
            return fail(ps, BATON_E_OVERFLOW, "byte size overflows");
    }
    if (nbytes > (uint64_t)INT64_MAX)
        return fail(ps, BATON_E_OVERFLOW, "byte size overflows");
    t->nbytes = nbytes;
    return 0;
}

static int cmp_name(const void *a, const void *b)
{
    return strcmp(((const struct name_index *)a)->name, ((const struct name_index *)b)->name);
}

/* Builds a name-sorted index of n entries and rejects duplicates. */
static int build_index(struct parse *ps, struct name_index **out, uint64_t n, const char *what,
                       const char *(*name_of)(const struct baton_gguf *, uint64_t))
{
    ps->where[0] = '\0';
    if (n == 0)
        return 0;
    struct name_index *ix = malloc((size_t)n * sizeof *ix);
    if (ix == NULL)
        return fail(ps, BATON_E_NOMEM, "out of memory");
    for (uint64_t i = 0; i < n; i++) {
        ix[i].name = name_of(ps->g, i);
        ix[i].idx = i;
    }
    qsort(ix, (size_t)n, sizeof *ix, cmp_name);
    *out = ix;
    for (uint64_t i = 1; i < n; i++) {
        if (strcmp(ix[i - 1].name, ix[i].name) == 0) {
            char shown[80];
            baton_gguf_escape(shown, sizeof shown, ix[i].name, strlen(ix[i].name));
            return fail(ps, BATON_E_FORMAT, "duplicate %s '%s'", what, shown);
        }
    }
    return 0;
}

/* One tensor's data range, for the overlap check. */
struct data_range {
    uint64_t offset;
    uint64_t nbytes;
    uint64_t idx;
};

static int cmp_range(const void *a, const void *b)
{
    const struct data_range *x = a, *y = b;
    if (x->offset != y->offset)
        return x->offset < y->offset ? -1 : 1;
    return x->idx < y->idx ? -1 : x->idx > y->idx;
}

/* Refuses two tensors whose data ranges [offset, offset + nbytes) share a
 * byte: each would be read (by inspect, quantize, a stage's upload) as the
 * other's data. An empty tensor holds no byte. The ranges, sorted by offset,
 * overlap somewhere only if two neighbours do: O(n log n) for the 2^20
 * tensors a file may have. Every range already lies inside the data section,
 * and the message names the later tensor in file order first. */
static int check_overlaps(struct parse *ps)
{
    const struct baton_gguf *g = ps->g;
    struct data_range *r;
    uint64_t n = 0;
    int st = 0;

    if (g->n_tensors < 2)
        return 0;
    r = malloc((size_t)g->n_tensors * sizeof *r);
    if (r == NULL)
        return fail(ps, BATON_E_NOMEM, "out of memory");
    for (uint64_t i = 0; i < g->n_tensors; i++) {
        if (g->tensors[i].nbytes == 0)
            continue;
        r[n].offset = g->tensors[i].offset;
        r[n].nbytes = g->tensors[i].nbytes;
        r[n].idx = i;
        n++;
    }
    qsort(r, (size_t)n, sizeof *r, cmp_range);
    for (uint64_t i = 1; i < n; i++) {
        /* sorted: r[i].offset >= r[i - 1].offset, so the difference cannot wrap */
        if (r[i].offset - r[i - 1].offset >= r[i - 1].nbytes)
            continue;
        const struct data_range *first = r[i - 1].idx < r[i].idx ? &r[i - 1] : &r[i];
        const struct data_range *later = first == &r[i] ? &r[i - 1] : &r[i];
        const char *first_name = g->names + g->tensors[first->idx].name_off;
        const char *later_name = g->names + g->tensors[later->idx].name_off;
        char first_shown[80], later_shown[80];
        baton_gguf_escape(first_shown, sizeof first_shown, first_name, strlen(first_name));
        baton_gguf_escape(later_shown, sizeof later_shown, later_name, strlen(later_name));
        snprintf(ps->where, sizeof ps->where, "tensor %llu '%s'",
                 (unsigned long long)later->idx, later_shown);
        st = fail(ps, BATON_E_FORMAT,
                  "data (offset %llu, %llu bytes) overlaps that of tensor %llu '%s' (offset "
                  "%llu, %llu bytes)",
                  (unsigned long long)later->offset, (unsigned long long)later->nbytes,
                  (unsigned long long)first->idx, first_shown, (unsigned long long)first->offset,
                  (unsigned long long)first->nbytes);
        break;
    }
    free(r);
    return st;
}

static const char *kv_name(const struct baton_gguf *g, uint64_t i)
{
    return g->kvs[i].key;
}

static const char *tensor_name(const struct baton_gguf *g, uint64_t i)
{
    return g->names + g->tensors[i].name_off;
}

static const struct name_index *lookup(const struct name_index *ix, uint64_t n, const char *name)
{
    if (ix == NULL || name == NULL)
        return NULL;
    uint64_t lo = 0, hi = n;
    while (lo < hi) {
        uint64_t mid = lo + (hi - lo) / 2;
        int c = strcmp(ix[mid].name, name);
        if (c == 0)
            return &ix[mid];
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return NULL;
}

static int parse(struct parse *ps)
{
    struct baton_gguf *g = ps->g;
    uint32_t magic = 0;
    uint64_t n_tensors = 0, n_kv = 0;
    int st;

    if (ps->c.size < GGUF_HEADER_BYTES)
        return fail(ps, BATON_E_TRUNCATED,
                    "file of %llu bytes is shorter than the %u-byte header: not a GGUF file, "
                    "or a truncated one",
                    (unsigned long long)ps->c.size, GGUF_HEADER_BYTES);
    rd_u32(&ps->c, &magic);
    rd_u32(&ps->c, &g->version);
    rd_u64(&ps->c, &n_tensors);
    rd_u64(&ps->c, &n_kv);
    if (magic != GGUF_MAGIC_LE)
        return fail(ps, BATON_E_FORMAT, "bad magic (not a GGUF file)");
    if (g->version >= 0x10000u && (g->version & 0xffffu) == 0)
        return fail(ps, BATON_E_FORMAT, "big-endian GGUF is not supported");
    if (g->version < BATON_GGUF_MIN_VERSION || g->version > BATON_GGUF_MAX_VERSION)
        return fail(ps, BATON_E_FORMAT, "unsupported GGUF version %u (need %u..%u)", g->version,
                    BATON_GGUF_MIN_VERSION, BATON_GGUF_MAX_VERSION);
    if (n_tensors > BATON_GGUF_MAX_TENSORS)
        return fail(ps, BATON_E_LIMIT, "tensor count %llu over limit %u",
                    (unsigned long long)n_tensors, BATON_GGUF_MAX_TENSORS);
    if (n_kv > BATON_GGUF_MAX_KV)
        return fail(ps, BATON_E_LIMIT, "key count %llu over limit %u", (unsigned long long)n_kv,
                    BATON_GGUF_MAX_KV);
    const uint64_t left = ps->c.size - ps->c.off;
    if (n_kv > left / GGUF_MIN_KV_BYTES)
        return fail(ps, BATON_E_TRUNCATED,
                    "key count %llu cannot fit in the %llu bytes after the header",
                    (unsigned long long)n_kv, (unsigned long long)left);
    if (n_tensors > left / GGUF_MIN_TENSOR_BYTES)
        return fail(ps, BATON_E_TRUNCATED,
                    "tensor count %llu cannot fit in the %llu bytes after the header",
                    (unsigned long long)n_tensors, (unsigned long long)left);

    if (n_kv > 0) {
        g->kvs = calloc((size_t)n_kv, sizeof *g->kvs);
        if (g->kvs == NULL)
            return fail(ps, BATON_E_NOMEM, "out of memory for %llu keys", (unsigned long long)n_kv);
    }
    for (uint64_t i = 0; i < n_kv; i++) {
        g->n_kv = i + 1; /* so close() frees what this pair allocated */
        st = read_kv(ps, i, &g->kvs[i]);
        if (st != 0)
            return st;
    }
    ps->where[0] = '\0';

    if (n_tensors > 0) {
        g->tensors = calloc((size_t)n_tensors, sizeof *g->tensors);
        if (g->tensors == NULL)
            return fail(ps, BATON_E_NOMEM, "out of memory for %llu tensors",
                        (unsigned long long)n_tensors);
    }
    g->n_tensors = n_tensors;
    for (uint64_t i = 0; i < n_tensors; i++) {
        st = read_tensor_info(ps, i, &g->tensors[i]);
        if (st != 0)
            return st;
    }
    ps->where[0] = '\0';

    /* The arena no longer moves: resolve key pointers, then index. */
    for (uint64_t i = 0; i < n_kv; i++)
        g->kvs[i].key = g->names + g->kvs[i].key_off;
    st = build_index(ps, &g->kv_sorted, n_kv, "key", kv_name);
    if (st != 0)
        return st;
    st = build_index(ps, &g->t_sorted, n_tensors, "tensor name", tensor_name);
    if (st != 0)
        return st;

    g->alignment = BATON_GGUF_DEFAULT_ALIGNMENT;
    const struct baton_gguf_kv *akv = baton_gguf_find_key(g, "general.alignment");
    if (akv != NULL) {
        snprintf(ps->where, sizeof ps->where, "key 'general.alignment'");
        if (akv->type != BATON_GGUF_U32)
            return fail(ps, BATON_E_FORMAT, "type %s, expected u32",
                        baton_gguf_type_name(akv->type));
        uint32_t a = (uint32_t)le(akv->val, 4);
        if (a == 0 || (a & (a - 1)) != 0 || a > BATON_GGUF_MAX_ALIGNMENT)
            return fail(ps, BATON_E_FORMAT, "alignment %u is not a power of 2 in 1..%u", a,
                        BATON_GGUF_MAX_ALIGNMENT);
        g->alignment = a;
        ps->where[0] = '\0';
    }

    /* Data section: the end of the infos rounded up (cannot wrap: off <=
     * size <= SIZE_MAX and alignment <= 2^20). */
    uint64_t rem = ps->c.off % g->alignment;
    g->data_offset = ps->c.off + (rem ? g->alignment - rem : 0);
    if (n_tensors > 0 && g->data_offset > ps->c.size)
        return fail(ps, BATON_E_TRUNCATED, "data section (offset %llu) starts past end of file",
                    (unsigned long long)g->data_offset);

    for (uint64_t i = 0; i < n_tensors; i++) {
        const struct tensor_rec *t = &g->tensors[i];
        char shown[80];
        const char *name = g->names + t->name_off;
        baton_gguf_escape(shown, sizeof shown, name, strlen(name));
        snprintf(ps->where, sizeof ps->where, "tensor %llu '%s'", (unsigned long long)i, shown);
        if (t->offset % g->alignment != 0)
            return fail(ps, BATON_E_FORMAT,
                        "data offset %llu is not a multiple of the alignment %u",
                        (unsigned long long)t->offset, g->alignment);
        const uint64_t data_bytes = ps->c.size - g->data_offset;
        uint32_t block_elems = 1, block_bytes = 1;
        (void)baton_type_block(t->type, &block_elems, &block_bytes); /* known: read_tensor */
        if ((t->offset > data_bytes || t->nbytes > data_bytes - t->offset) && block_elems > 1)
            /* a quantized tensor: name its blocks (K-quants: super-blocks
             * of 256), so a file cut inside one says so */
            return fail(ps, BATON_E_BOUNDS,
                        "data past end of file (offset %llu, %llu bytes = %llu %s blocks of "
                        "%u bytes, %llu available)",
                        (unsigned long long)t->offset, (unsigned long long)t->nbytes,
                        (unsigned long long)(t->nbytes / block_bytes), baton_type_name(t->type),
                        block_bytes, (unsigned long long)data_bytes);
        if (t->offset > data_bytes || t->nbytes > data_bytes - t->offset)
            return fail(ps, BATON_E_BOUNDS,
                        "data past end of file (offset %llu, %llu bytes, %llu available)",
                        (unsigned long long)t->offset, (unsigned long long)t->nbytes,
                        (unsigned long long)data_bytes);
    }
    st = check_overlaps(ps);
    if (st != 0)
        return st;
    ps->where[0] = '\0';
    return 0;
}

void baton_gguf_close(struct baton_gguf *g)
{
    if (g == NULL)
        return;
    for (uint64_t i = 0; i < g->n_kv; i++)
        free(g->kvs[i].elem_offs);
    free(g->kvs);
    free(g->kv_sorted);
    free(g->tensors);
    free(g->t_sorted);
    free(g->names);
    if (g->mapped)
        munmap((void *)g->base, (size_t)g->size);
    free(g);
}

/* Parses (base, size) into a new struct; on failure frees it (unmapping if
 * mapped) and returns the status. */
static int open_common(const void *base, uint64_t size, int mapped, const char *file,
                       struct baton_gguf **out, char *err, size_t err_len)
{
    struct parse ps = {.file = file, .err = err, .err_len = err_len};
    struct baton_gguf *g = calloc(1, sizeof *g);
    int st;
    if (g == NULL) {
        st = fail(&ps, BATON_E_NOMEM, "out of memory");
        if (mapped)
            munmap((void *)base, (size_t)size);
        return st;
    }
    g->base = base;
    g->size = size;
    g->mapped = mapped;
    ps.g = g;
    ps.c.base = base;
    ps.c.size = size;
    st = parse(&ps);
    if (st != 0) {
        baton_gguf_close(g);
        return st;
    }
    *out = g;
    return 0;
}

int baton_gguf_open_buffer(const void *data, size_t len, const char *name, struct baton_gguf **out,
                           char *err, size_t err_len)
{
    if (err != NULL && err_len > 0)
        err[0] = '\0';
    if (out == NULL)
        return BATON_E_INVAL;
    *out = NULL;
    if (name == NULL)
        name = "<memory>";
    if (data == NULL && len != 0) {
        if (err != NULL && err_len > 0)
            snprintf(err, err_len, "%s: no data", name);
        return BATON_E_INVAL;
    }
    static const uint8_t empty[1];
    return open_common(data ? data : empty, len, 0, name, out, err, err_len);
}

int baton_gguf_open(const char *path, struct baton_gguf **out, char *err, size_t err_len)
{
    int st = 0;
    int fd = -1;
    struct stat sb;
    if (err != NULL && err_len > 0)
        err[0] = '\0';
    if (out == NULL || path == NULL)
        return BATON_E_INVAL;
    *out = NULL;

    /* O_NONBLOCK: opening a FIFO must not wait for a writer before fstat
     * refuses it (no effect on the regular file that is mapped) */
    fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
    if (fd < 0) {
        st = BATON_E_IO;
        if (err != NULL && err_len > 0)
            snprintf(err, err_len, "%s: cannot open: %s", path, strerror(errno));
        goto out;
    }
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
        st = BATON_E_IO;
        if (err != NULL && err_len > 0)
            snprintf(err, err_len, "%s: not a regular file", path);
        goto out;
    }
    if (sb.st_size < (off_t)GGUF_HEADER_BYTES) {
        st = BATON_E_TRUNCATED;
        if (err != NULL && err_len > 0)
            snprintf(err, err_len,
                     "%s: file of %lld bytes is shorter than the %u-byte header: not a GGUF "
                     "file, or a truncated one",
                     path, (long long)sb.st_size, GGUF_HEADER_BYTES);
        goto out;
    }
    if ((uint64_t)sb.st_size > SIZE_MAX) {
        st = BATON_E_LIMIT;
        if (err != NULL && err_len > 0)
            snprintf(err, err_len, "%s: file too large to map", path);
        goto out;
    }
    void *map = mmap(NULL, (size_t)sb.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (map == MAP_FAILED) {
        st = BATON_E_IO;
        if (err != NULL && err_len > 0)
            snprintf(err, err_len, "%s: mmap: %s", path, strerror(errno));
        goto out;
    }
    close(fd);
    fd = -1;
    st = open_common(map, (uint64_t)sb.st_size, 1, path, out, err, err_len);
out:
    if (fd >= 0)
        close(fd);
    return st;
}

/* ---- accessors ---- */

uint32_t baton_gguf_version(const struct baton_gguf *g)
{
    return g->version;
}

uint32_t baton_gguf_alignment(const struct baton_gguf *g)
{
    return g->alignment;
}

uint64_t baton_gguf_data_offset(const struct baton_gguf *g)
{
    return g->data_offset;
}

uint64_t baton_gguf_file_size(const struct baton_gguf *g)
{
    return g->size;
}

const void *baton_gguf_base(const struct baton_gguf *g)
{
    return g->base;
}

uint64_t baton_gguf_n_kv(const struct baton_gguf *g)
{
    return g->n_kv;
}

const struct baton_gguf_kv *baton_gguf_kv_at(const struct baton_gguf *g, uint64_t i)
{
    return i < g->n_kv ? &g->kvs[i] : NULL;
}

const struct baton_gguf_kv *baton_gguf_find_key(const struct baton_gguf *g, const char *key)
{
    const struct name_index *e = lookup(g->kv_sorted, g->n_kv, key);
    return e ? &g->kvs[e->idx] : NULL;
}

const char *baton_gguf_kv_key(const struct baton_gguf_kv *kv)
{
    return kv->key;
}

uint32_t baton_gguf_kv_type(const struct baton_gguf_kv *kv)
{
    return kv->type;
}

int baton_gguf_kv_scalar(const struct baton_gguf_kv *kv, struct baton_gguf_scalar *out)
{
    if (kv->type == BATON_GGUF_ARRAY)
        return BATON_E_TYPE;
    /* A string's val points past its length field. */
    decode_scalar(kv->type, kv->type == BATON_GGUF_STRING ? kv->val - 8 : kv->val, out);
    return 0;
}

/* Narrows an integer scalar to [lo, hi]; E_TYPE if not an integer. */
static int scalar_int(const struct baton_gguf_scalar *s, int64_t lo, uint64_t hi,
                      int64_t *out_signed, uint64_t *out_unsigned)
{
    switch (s->type) {
    case BATON_GGUF_U8:
    case BATON_GGUF_U16:
    case BATON_GGUF_U32:
    case BATON_GGUF_U64:
        if (s->v.u > hi) /* lo <= 0 in every use */
            return BATON_E_BOUNDS;
        if (out_signed)
            *out_signed = (int64_t)s->v.u;
        if (out_unsigned)
            *out_unsigned = s->v.u;
        return 0;
    case BATON_GGUF_I8:
    case BATON_GGUF_I16:
    case BATON_GGUF_I32:
    case BATON_GGUF_I64:
        if (s->v.i < lo || (s->v.i >= 0 && (uint64_t)s->v.i > hi))
            return BATON_E_BOUNDS;
        if (out_signed)
            *out_signed = s->v.i;
        if (out_unsigned)
            *out_unsigned = (uint64_t)s->v.i;
        return 0;
    default:
        return BATON_E_TYPE;
    }
}

int baton_gguf_kv_u32(const struct baton_gguf_kv *kv, uint32_t *out)
{
    struct baton_gguf_scalar s = {0};
    uint64_t v;
    int st = baton_gguf_kv_scalar(kv, &s);
    if (st == 0)
        st = scalar_int(&s, 0, UINT32_MAX, NULL, &v);
    if (st == 0)
        *out = (uint32_t)v;
    return st;
}

int baton_gguf_kv_f32(const struct baton_gguf_kv *kv, float *out)
{
    struct baton_gguf_scalar s = {0};
    int st = baton_gguf_kv_scalar(kv, &s);
    if (st != 0)
        return st;
    if (s.type != BATON_GGUF_F32 && s.type != BATON_GGUF_F64)
        return BATON_E_TYPE;
    *out = (float)s.v.f;
    return 0;
}

int baton_gguf_kv_bool(const struct baton_gguf_kv *kv, int *out)
{
    if (kv->type != BATON_GGUF_BOOL)
        return BATON_E_TYPE;
    *out = kv->val[0] != 0;
    return 0;
}

int baton_gguf_kv_string(const struct baton_gguf_kv *kv, const char **ptr, size_t *len)
{
    if (kv->type != BATON_GGUF_STRING)
        return BATON_E_TYPE;
    *ptr = (const char *)kv->val;
    *len = (size_t)kv->str_len;
    return 0;
}

int baton_gguf_kv_raw(const struct baton_gguf_kv *kv, const void **ptr, size_t *len)
{
    const uint8_t *start, *end;

    /* every bound below was checked against the file when it was opened */
    if (kv->type == BATON_GGUF_STRING) {
        start = kv->val - 8;
        end = kv->val + kv->str_len;
    } else if (kv->type == BATON_GGUF_ARRAY) {
        start = kv->val - 12;
        if (kv->count == 0) {
            end = kv->val;
        } else if (kv->elem_type == BATON_GGUF_STRING) {
            struct baton_gguf_scalar last;

            decode_scalar(BATON_GGUF_STRING, kv->val + kv->elem_offs[kv->count - 1], &last);
            end = (const uint8_t *)last.v.str.ptr + last.v.str.len;
        } else {
            end = kv->val + kv->count * fixed_size(kv->elem_type);
        }
    } else {
        start = kv->val;
        end = kv->val + fixed_size(kv->type);
    }
    *ptr = start;
    *len = (size_t)(end - start);
    return 0;
}

int baton_gguf_kv_array(const struct baton_gguf_kv *kv, uint32_t *elem_type, uint64_t *count)
{
    if (kv->type != BATON_GGUF_ARRAY)
        return BATON_E_TYPE;
    *elem_type = kv->elem_type;
    *count = kv->count;
    return 0;
}

int baton_gguf_arr_get(const struct baton_gguf_kv *kv, uint64_t i, struct baton_gguf_scalar *out)
{
    if (kv->type != BATON_GGUF_ARRAY)
        return BATON_E_TYPE;
    if (i >= kv->count)
        return BATON_E_BOUNDS;
    if (kv->elem_type == BATON_GGUF_STRING)
        decode_scalar(kv->elem_type, kv->val + kv->elem_offs[i], out);
    else
        decode_scalar(kv->elem_type, kv->val + i * fixed_size(kv->elem_type), out);
    return 0;
}

int baton_gguf_arr_string(const struct baton_gguf_kv *kv, uint64_t i, const char **ptr, size_t *len)
{
    struct baton_gguf_scalar s = {0};
    if (kv->type != BATON_GGUF_ARRAY || kv->elem_type != BATON_GGUF_STRING)
        return BATON_E_TYPE;
    int st = baton_gguf_arr_get(kv, i, &s);
    if (st == 0) {
        *ptr = s.v.str.ptr;
        *len = s.v.str.len;
    }
    return st;
}

int baton_gguf_arr_f32(const struct baton_gguf_kv *kv, uint64_t i, float *out)
{
    struct baton_gguf_scalar s = {0};
    if (kv->type != BATON_GGUF_ARRAY ||
        (kv->elem_type != BATON_GGUF_F32 && kv->elem_type != BATON_GGUF_F64))
        return BATON_E_TYPE;
    int st = baton_gguf_arr_get(kv, i, &s);
    if (st == 0)
        *out = (float)s.v.f;
    return st;
}

int baton_gguf_arr_i32(const struct baton_gguf_kv *kv, uint64_t i, int32_t *out)
{
    struct baton_gguf_scalar s = {0};
    int64_t v;
    if (kv->type != BATON_GGUF_ARRAY)
        return BATON_E_TYPE;
    int st = baton_gguf_arr_get(kv, i, &s);
    if (st == 0)
        st = scalar_int(&s, INT32_MIN, INT32_MAX, &v, NULL);
    if (st == 0)
        *out = (int32_t)v;
    return st;
}

int baton_gguf_get_u32(const struct baton_gguf *g, const char *key, uint32_t *out)
{
    const struct baton_gguf_kv *kv = baton_gguf_find_key(g, key);
    return kv ? baton_gguf_kv_u32(kv, out) : BATON_E_NOT_FOUND;
}

int baton_gguf_get_f32(const struct baton_gguf *g, const char *key, float *out)
{
    const struct baton_gguf_kv *kv = baton_gguf_find_key(g, key);
    return kv ? baton_gguf_kv_f32(kv, out) : BATON_E_NOT_FOUND;
}

int baton_gguf_get_bool(const struct baton_gguf *g, const char *key, int *out)
{
    const struct baton_gguf_kv *kv = baton_gguf_find_key(g, key);
    return kv ? baton_gguf_kv_bool(kv, out) : BATON_E_NOT_FOUND;
}

int baton_gguf_get_string(const struct baton_gguf *g, const char *key, const char **ptr,
                          size_t *len)
{
    const struct baton_gguf_kv *kv = baton_gguf_find_key(g, key);
    return kv ? baton_gguf_kv_string(kv, ptr, len) : BATON_E_NOT_FOUND;
}

uint64_t baton_gguf_n_tensors(const struct baton_gguf *g)
{
    return g->n_tensors;
}

int baton_gguf_tensor_at(const struct baton_gguf *g, uint64_t i, struct baton_gguf_tensor *out)
{
    if (i >= g->n_tensors)
        return BATON_E_BOUNDS;
    const struct tensor_rec *t = &g->tensors[i];
    out->name = g->names + t->name_off;
    out->type = t->type;
    out->n_dims = t->n_dims;
    memcpy(out->ne, t->ne, sizeof out->ne);
    out->offset = t->offset;
    out->file_offset = g->data_offset + t->offset;
    out->nbytes = t->nbytes;
    out->data = g->base + out->file_offset;
    return 0;
}

int baton_gguf_find_tensor(const struct baton_gguf *g, const char *name,
                           struct baton_gguf_tensor *out, uint64_t *index)
{
    const struct name_index *e = lookup(g->t_sorted, g->n_tensors, name);
    if (e == NULL)
        return BATON_E_NOT_FOUND;
    if (index != NULL)
        *index = e->idx;
    return baton_gguf_tensor_at(g, e->idx, out);
}
