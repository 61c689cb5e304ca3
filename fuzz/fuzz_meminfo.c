/* Fuzz target meminfo: baton_meminfo_available (src/model/meminfo.c,
 * compiled into this target: it needs nothing but the status codes), the
 * MemAvailable line of a /proc/meminfo text that gen-model compares its
 * model with.
 *
 * Input: the text itself, as is (any bytes; NUL, CR and the rest are
 * ordinary bytes). The parser gets an exact-size heap copy with no
 * terminator, so a read past len is a heap overflow under ASan.
 *
 * Properties, against an oracle written here from meminfo.h (proc(5): a line
 * "MemAvailable:", spaces, a decimal count of kB, " kB"):
 *   - the result is the oracle's: the first line (lines end at LF) that
 *     begins with "MemAvailable:" decides; none is BATON_E_NOT_FOUND; after
 *     the name zero or more ' ', one or more digits, then exactly " kB" to
 *     the end of the line, else BATON_E_FORMAT; a count above 2^54 - 1
 *     (decided on the decimal string, leading zeros dropped, before the
 *     rest of the line is looked at) is BATON_E_OVERFLOW;
 *   - on success *bytes is the count times 1024 (the oracle converts the
 *     digits itself);
 *   - on error *bytes is unchanged (checked from two different values);
 *   - the same call twice gives the same result;
 *   - lines after the deciding one are not read: the text cut just before
 *     that line's LF (an exact-size copy again) gives the same result and
 *     value; a text without a MemAvailable line gives BATON_E_NOT_FOUND cut
 *     anywhere (checked cut in half).
 */
#include "fuzz_common.h"

#include "baton/status.h"
#include "model/meminfo.h"

/* 2^54 - 1: the largest count of kB whose bytes fit in 64 bits */
static const char kib_max[] = "18014398509481983";

struct oracle {
    int status;
    uint64_t bytes;  /* on success */
    size_t line_end; /* end of the deciding line (its LF or size); size when none */
};

/* meminfo.h's rules, written apart from meminfo.c: lines found with memchr,
 * overflow decided by comparing decimal strings rather than by arithmetic. */
static struct oracle ref_meminfo(const uint8_t *t, size_t size)
{
    static const char name[] = "MemAvailable:";
    const size_t name_len = sizeof name - 1;
    struct oracle o = {BATON_E_NOT_FOUND, 0, size};
    size_t start = 0;

    for (;;) {
        const uint8_t *lf = start < size ? memchr(t + start, '\n', size - start) : NULL;
        size_t end = lf ? (size_t)(lf - t) : size;

        if (end - start >= name_len && memcmp(t + start, name, name_len) == 0) {
            size_t d = start + name_len, z, e;

            o.line_end = end;
            while (d < end && t[d] == ' ')
                d++;
            for (e = d; e < end && t[e] >= '0' && t[e] <= '9'; e++)
                ;
            for (z = d; z < e && t[z] == '0'; z++)
                ;
            if (e == d) {
                o.status = BATON_E_FORMAT;
            } else if (e - z > sizeof kib_max - 1 ||
                       (e - z == sizeof kib_max - 1 && memcmp(t + z, kib_max, e - z) > 0)) {
                o.status = BATON_E_OVERFLOW;
            } else if (end - e != 3 || t[e] != ' ' || t[e + 1] != 'k' || t[e + 2] != 'B') {
                o.status = BATON_E_FORMAT;
            } else {
                uint64_t kib = 0;
                for (size_t i = z; i < e; i++)
                    kib = kib * 10 + (uint64_t)(t[i] - '0');
                o.status = 0;
                o.bytes = kib * 1024;
            }
            return o;
        }
        if (!lf)
            return o;
        start = end + 1;
    }
}

/* One call on an exact-size copy of t[0..n); *bytes starts as start_value. */
static int call(const uint8_t *t, size_t n, uint64_t start_value, uint64_t *bytes)
{
    uint8_t *exact = fuzz_dup(t, n);
    *bytes = start_value;
    int rc = baton_meminfo_available((const char *)exact, n, bytes);
    free(exact);
    return rc;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const struct oracle o = ref_meminfo(data, size);
    const uint64_t sentinel[2] = {0, 0x5a5a5a5a5a5a5a5aull};
    uint64_t got[2];
    int rc[2];

    for (int k = 0; k < 2; k++) {
        rc[k] = call(data, size, sentinel[k], &got[k]);
        FUZZ_CHECK(rc[k] == o.status, "status %d (%s), oracle %d (%s)", rc[k],
                   baton_status_name(rc[k]), o.status, baton_status_name(o.status));
        if (o.status == 0)
            FUZZ_CHECK(got[k] == o.bytes, "bytes %llu, oracle %llu", (unsigned long long)got[k],
                       (unsigned long long)o.bytes);
        else
            FUZZ_CHECK(got[k] == sentinel[k], "bytes changed to %llu on error %d",
                       (unsigned long long)got[k], rc[k]);
    }
    FUZZ_CHECK(rc[0] == rc[1] && (rc[0] != 0 || got[0] == got[1]), "not deterministic");

    /* nothing after the deciding line matters */
    if (o.status != BATON_E_NOT_FOUND) {
        uint64_t cut;
        int rc_cut = call(data, o.line_end, sentinel[1], &cut);
        FUZZ_CHECK(rc_cut == o.status, "cut after the line: status %d, whole text %d", rc_cut,
                   o.status);
        FUZZ_CHECK(cut == (o.status == 0 ? o.bytes : sentinel[1]), "cut after the line: bytes");
    } else {
        uint64_t half;
        int rc_half = call(data, size / 2, sentinel[1], &half);
        FUZZ_CHECK(rc_half == BATON_E_NOT_FOUND && half == sentinel[1],
                   "first half of a text without the line: status %d", rc_half);
    }
    return 0;
}
