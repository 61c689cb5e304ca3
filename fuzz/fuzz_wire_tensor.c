/* Fuzz target wire_tensor: tensor descriptors (baton_wire_decode_tensor),
 * their byte extent (baton_wire_tensor_extent) and contiguous strides
 * (baton_tensor_contiguous_nb).
 *
 * Input: an 88-byte descriptor as on the wire (docs/PROTOCOL.md, "Tensor
 * descriptor"); longer inputs are also decoded as a sequence of
 * descriptors, the way COPY_TENSOR and GRAPH_COMPUTE carry them.
 *
 * Oracle: a reference written here in 128-bit arithmetic from the protocol
 * text (type table of core/types.h; checks in the documented order: type,
 * ne <= 2^40, ne[0] block multiple, nb contiguous, no 64-bit wrap of the
 * extent or of offset + extent). Properties: same result code, same
 * nbytes; cursor +88 on success, unchanged on failure. A second pass forces
 * small dimensions and the contiguous strides, so the success path is
 * reached often and its nbytes compared exactly.
 */
#include "fuzz_common.h"

#include "baton/status.h"
#include "core/limits.h"
#include "wire/wire.h"

typedef unsigned __int128 u128;

struct ref_type {
    uint32_t id, elems, bytes;
};
static const struct ref_type ref_types[] = {{0, 1, 4},      {1, 1, 2},      {2, 32, 18},
                                            {8, 32, 34},    {10, 256, 84},  {11, 256, 110},
                                            {12, 256, 144}, {13, 256, 176}, {14, 256, 210},
                                            {26, 1, 4},     {6, 32, 22},    {7, 32, 24},
                                            {30, 1, 2},     {20, 32, 18},   {23, 256, 136}};

static const struct ref_type *ref_type(uint32_t id)
{
    for (size_t i = 0; i < sizeof ref_types / sizeof ref_types[0]; i++)
        if (ref_types[i].id == id)
            return &ref_types[i];
    return NULL;
}

/* Exact contiguous strides; returns 0 when all fit in 64 bits, else
 * BATON_E_OVERFLOW (BATON_E_TYPE / BATON_E_SHAPE as the protocol says). */
static int ref_strides(uint32_t type, const uint64_t ne[4], uint64_t nb[4])
{
    const struct ref_type *t = ref_type(type);
    if (!t)
        return BATON_E_TYPE;
    if (ne[0] % t->elems != 0)
        return BATON_E_SHAPE;
    u128 s = t->bytes;
    nb[0] = t->bytes;
    s = (u128)(ne[0] / t->elems) * t->bytes;
    for (int i = 1; i < 4; i++) {
        if (s > UINT64_MAX)
            return BATON_E_OVERFLOW;
        nb[i] = (uint64_t)s;
        s = (u128)nb[i] * ne[i];
    }
    return 0;
}

/* Expected result of tensor_extent; *nbytes on success. For a stride that
 * does not fit in 64 bits the given nb cannot equal it, so SHAPE and
 * OVERFLOW are both right: *alt receives the second acceptable code. */
static int ref_extent(uint32_t type, const uint64_t ne[4], const uint64_t nb[4], uint64_t *nbytes,
                      int *alt)
{
    uint64_t want[4];
    *alt = 1; /* no alternative */
    if (!ref_type(type))
        return BATON_E_TYPE;
    for (int i = 0; i < 4; i++)
        if (ne[i] > BATON_MAX_DIM_ELEMS)
            return BATON_E_LIMIT;
    int rc = ref_strides(type, ne, want);
    if (rc == BATON_E_OVERFLOW) {
        *alt = BATON_E_SHAPE;
        return rc;
    }
    if (rc != 0)
        return rc;
    for (int i = 0; i < 4; i++)
        if (nb[i] != want[i])
            return BATON_E_SHAPE;
    u128 n = (u128)want[3] * ne[3];
    if (n > UINT64_MAX)
        return BATON_E_OVERFLOW;
    *nbytes = (uint64_t)n;
    return 0;
}

static void load_desc(const uint8_t *p, uint64_t *off, uint32_t *type, uint64_t ne[4],
                      uint64_t nb[4])
{
    *off = fuzz_le(p + 8, 8);
    *type = (uint32_t)fuzz_le(p + 16, 4);
    for (int i = 0; i < 4; i++) {
        ne[i] = fuzz_le(p + 24 + 8 * i, 8);
        nb[i] = fuzz_le(p + 56 + 8 * i, 8);
    }
}

static void check_decode_at(const uint8_t *buf, size_t size, size_t at)
{
    struct baton_tensor_desc t;
    size_t pos = at;
    memset(&t, 0xC3, sizeof t);
    int rc = baton_wire_decode_tensor(buf, size, &pos, &t);
    if (at > size || size - at < BATON_TENSOR_DESC_BYTES) {
        FUZZ_CHECK(rc == BATON_E_TRUNCATED && pos == at, "short input: %d", rc);
        return;
    }
    const uint8_t *p = buf + at;
    uint64_t off, ne[4], nb[4], nbytes = 0;
    uint32_t type;
    int alt;
    load_desc(p, &off, &type, ne, nb);
    int want;
    if (fuzz_le(p + 20, 4) != 0) {
        want = BATON_E_INVAL;
        alt = 1;
    } else {
        want = ref_extent(type, ne, nb, &nbytes, &alt);
        if (want == 0 && nbytes > UINT64_MAX - off)
            want = BATON_E_OVERFLOW;
    }
    FUZZ_CHECK(rc == want || rc == alt, "decode_tensor gave %d, oracle %d", rc, want);
    if (rc != 0) {
        FUZZ_CHECK(pos == at, "cursor moved on failure");
        return;
    }
    FUZZ_CHECK(pos == at + BATON_TENSOR_DESC_BYTES, "cursor");
    FUZZ_CHECK(t.nbytes == nbytes, "nbytes %llu, oracle %llu", (unsigned long long)t.nbytes,
               (unsigned long long)nbytes);
    FUZZ_CHECK(t.buffer == fuzz_le(p, 8) && t.offset == off && t.type == type &&
                   memcmp(t.ne, ne, sizeof ne) == 0 && memcmp(t.nb, nb, sizeof nb) == 0,
               "field values");
    uint8_t enc[BATON_TENSOR_DESC_BYTES];
    baton_wire_encode_tensor(enc, &t);
    FUZZ_CHECK(memcmp(enc, p, sizeof enc) == 0, "encode(decode(x)) != x");
}

static void check_extent(uint32_t type, const uint64_t ne[4], const uint64_t nb[4])
{
    uint64_t nbytes = 777, ref_n = 0;
    int alt;
    int rc = baton_wire_tensor_extent(type, ne, nb, &nbytes);
    int want = ref_extent(type, ne, nb, &ref_n, &alt);
    FUZZ_CHECK(rc == want || rc == alt, "tensor_extent gave %d, oracle %d", rc, want);
    if (rc == 0)
        FUZZ_CHECK(nbytes == ref_n, "tensor_extent nbytes");

    /* strides alone, with ne inside the limit (where nb[0]*ne[0]/block and
     * ne[0]/block*nb[0] agree) */
    int in_limit = 1;
    for (int i = 0; i < 4; i++)
        in_limit &= ne[i] <= BATON_MAX_DIM_ELEMS;
    if (!in_limit)
        return;
    uint64_t got[4], ref_nb[4];
    memset(got, 0, sizeof got);
    rc = baton_tensor_contiguous_nb(type, ne, got);
    want = ref_strides(type, ne, ref_nb);
    FUZZ_CHECK(rc == want, "contiguous_nb gave %d, oracle %d", rc, want);
    if (rc == 0)
        FUZZ_CHECK(memcmp(got, ref_nb, sizeof got) == 0, "contiguous_nb values");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    uint8_t *buf = fuzz_dup(data, size);
    check_decode_at(buf, size, 0);
    check_decode_at(buf, size, size); /* nothing left */
    /* a sequence of descriptors, and one misaligned start */
    for (size_t at = BATON_TENSOR_DESC_BYTES; at < size && at < 64 * BATON_TENSOR_DESC_BYTES;
         at += BATON_TENSOR_DESC_BYTES)
        check_decode_at(buf, size, at);
    if (size > 1)
        check_decode_at(buf, size, 1);

    if (size >= BATON_TENSOR_DESC_BYTES) {
        uint64_t off, ne[4], nb[4];
        uint32_t type;
        load_desc(buf, &off, &type, ne, nb);
        check_extent(type, ne, nb);

        /* forced onto the success path: a known type, small dimensions
         * (kept at 0 when the input says 0), contiguous strides */
        uint64_t sne[4], snb[4], n_ok;
        const struct ref_type *t = &ref_types[type % (sizeof ref_types / sizeof ref_types[0])];
        for (int i = 0; i < 4; i++)
            sne[i] = ne[i] & (i == 0 ? 0xFFFFFu : 0xFFFu);
        sne[0] -= sne[0] % t->elems;
        int alt;
        if (ref_strides(t->id, sne, snb) == 0 && ref_extent(t->id, sne, snb, &n_ok, &alt) == 0) {
            uint64_t got = 0;
            FUZZ_CHECK(baton_wire_tensor_extent(t->id, sne, snb, &got) == 0 && got == n_ok,
                       "contiguous tensor rejected or wrong extent");
        }
        check_extent(t->id, sne, snb);
        /* one stride off by the input's last byte */
        snb[buf[size - 1] & 3] += 1 + (buf[size - 1] >> 2);
        check_extent(t->id, sne, snb);
    }
    free(buf);
    return 0;
}
