/* Fuzz target put_string: baton_cli_put_string (src/cli/baton_inspect.c),
 * the printer of untrusted GGUF strings (metadata values, key and tensor
 * names) of `baton inspect` and of baton bench --json.
 *
 * Input: byte 0 bit 0 = JSON mode (else text), then the string's bytes
 * (an exact-size heap block, no terminator).
 *
 * The output (into an open_memstream) is checked against cli.h's contract,
 * decoded by a reader written here:
 *   - no raw control character reaches the terminal or the JSON reader: no
 *     byte below 0x20, no DEL, no C1 control (U+0080..U+009F encoded in
 *     UTF-8), and the output is valid UTF-8;
 *   - text: '"', the escaped bytes (\" \\ \n \t \xHH, the rest as is), '"',
 *     then "...(N bytes)" exactly when the string is longer than 160 bytes;
 *     unescaped it is the string's first min(len, 160) bytes, byte for byte;
 *   - JSON: one RFC 8259 string; decoded, it is the string with each byte
 *     that does not begin a valid UTF-8 sequence as U+FFFD, never cut.
 *
 * The same string goes through baton_gguf_escape (src/model/gguf.h), the
 * escaping of every message that quotes a model file, at several sizes:
 * the output is NUL-terminated inside cap, clean as above, and unescapes
 * (\\ and \xHH) to the string, or, cut with "..." where it does not fit,
 * to a prefix of it; at 4 x len + 1 bytes it is never cut.
 */
#include <stdio.h>

#include "fuzz_common.h"

#include "cli/cli.h"
#include "model/gguf.h"

#define TEXT_MAX 160u

/* Length of the valid UTF-8 sequence at s[0..n) (RFC 3629: no overlong
 * form, no surrogate, at most U+10FFFF), or 0. */
static size_t utf8_len(const uint8_t *s, size_t n, uint32_t *cp)
{
    size_t len;
    uint32_t c, min;
    if (s[0] < 0x80) {
        *cp = s[0];
        return 1;
    }
    if ((s[0] & 0xe0) == 0xc0) {
        len = 2;
        c = s[0] & 0x1f;
        min = 0x80;
    } else if ((s[0] & 0xf0) == 0xe0) {
        len = 3;
        c = s[0] & 0x0f;
        min = 0x800;
    } else if ((s[0] & 0xf8) == 0xf0) {
        len = 4;
        c = s[0] & 0x07;
        min = 0x10000;
    } else {
        return 0;
    }
    if (len > n)
        return 0;
    for (size_t i = 1; i < len; i++) {
        if ((s[i] & 0xc0) != 0x80)
            return 0;
        c = c << 6 | (s[i] & 0x3f);
    }
    if (c < min || c > 0x10ffff || (c >= 0xd800 && c <= 0xdfff))
        return 0;
    *cp = c;
    return len;
}

static size_t put_utf8(uint8_t *out, uint32_t c)
{
    if (c < 0x80) {
        out[0] = (uint8_t)c;
        return 1;
    }
    if (c < 0x800) {
        out[0] = (uint8_t)(0xc0 | c >> 6);
        out[1] = (uint8_t)(0x80 | (c & 0x3f));
        return 2;
    }
    if (c < 0x10000) {
        out[0] = (uint8_t)(0xe0 | c >> 12);
        out[1] = (uint8_t)(0x80 | ((c >> 6) & 0x3f));
        out[2] = (uint8_t)(0x80 | (c & 0x3f));
        return 3;
    }
    out[0] = (uint8_t)(0xf0 | c >> 18);
    out[1] = (uint8_t)(0x80 | ((c >> 12) & 0x3f));
    out[2] = (uint8_t)(0x80 | ((c >> 6) & 0x3f));
    out[3] = (uint8_t)(0x80 | (c & 0x3f));
    return 4;
}

static int hexval(uint8_t c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

/* No raw control character, valid UTF-8. */
static void check_clean(const uint8_t *o, size_t n)
{
    for (size_t i = 0; i < n;) {
        uint32_t c;
        size_t l = utf8_len(o + i, n - i, &c);
        FUZZ_CHECK(l > 0, "output byte %zu (0x%02x) is not valid UTF-8", i, o[i]);
        FUZZ_CHECK(c >= 0x20 && c != 0x7f && !(c >= 0x80 && c <= 0x9f),
                   "raw control character U+%04X at output byte %zu", c, i);
        i += l;
    }
}

static void check_text(const uint8_t *s, size_t len, const uint8_t *o, size_t n)
{
    const size_t shown = len > TEXT_MAX ? TEXT_MAX : len;
    uint8_t *u = malloc(n + 1);
    size_t un = 0, i = 1;
    FUZZ_CHECK(u != NULL, "malloc");
    FUZZ_CHECK(n >= 2 && o[0] == '"', "text output does not begin with a quote");
    while (i < n && o[i] != '"') {
        if (o[i] != '\\') {
            u[un++] = o[i++];
            continue;
        }
        FUZZ_CHECK(i + 1 < n, "escape at the end");
        switch (o[i + 1]) {
        case '"': case '\\': u[un++] = o[i + 1]; i += 2; break;
        case 'n': u[un++] = '\n'; i += 2; break;
        case 't': u[un++] = '\t'; i += 2; break;
        case 'x': {
            FUZZ_CHECK(i + 3 < n, "short \\x escape");
            int h = hexval(o[i + 2]), l = hexval(o[i + 3]);
            FUZZ_CHECK(h >= 0 && l >= 0, "bad \\x escape");
            u[un++] = (uint8_t)(h << 4 | l);
            i += 4;
            break;
        }
        default: FUZZ_CHECK(0, "unknown escape \\%c", o[i + 1]);
        }
    }
    FUZZ_CHECK(i < n, "no closing quote");
    i++;
    FUZZ_CHECK(un == shown && memcmp(u, s, shown) == 0,
               "text unescapes to %zu bytes, not the string's first %zu", un, shown);
    char tail[64] = "";
    if (shown < len)
        snprintf(tail, sizeof tail, "...(%zu bytes)", len);
    FUZZ_CHECK(n - i == strlen(tail) && memcmp(o + i, tail, n - i) == 0,
               "text output's tail is not \"%s\"", tail);
    free(u);
}

static void check_json(const uint8_t *s, size_t len, const uint8_t *o, size_t n)
{
    uint8_t *want = malloc(len * 3 + 1), *got = malloc(n * 4 + 1);
    size_t wn = 0, gn = 0, i;
    FUZZ_CHECK(want != NULL && got != NULL, "malloc");
    for (i = 0; i < len;) {
        uint32_t c;
        size_t l = utf8_len(s + i, len - i, &c);
        if (l == 0) {
            wn += put_utf8(want + wn, 0xfffd);
            i++;
        } else {
            memcpy(want + wn, s + i, l);
            wn += l;
            i += l;
        }
    }
    FUZZ_CHECK(n >= 2 && o[0] == '"' && o[n - 1] == '"', "JSON output is not one quoted string");
    for (i = 1; i < n - 1;) {
        if (o[i] == '"')
            FUZZ_CHECK(0, "unescaped quote inside the JSON string at %zu", i);
        if (o[i] != '\\') {
            got[gn++] = o[i++];
            continue;
        }
        FUZZ_CHECK(i + 1 < n - 1, "escape at the end");
        switch (o[i + 1]) {
        case '"': case '\\': case '/': got[gn++] = o[i + 1]; i += 2; break;
        case 'n': got[gn++] = '\n'; i += 2; break;
        case 't': got[gn++] = '\t'; i += 2; break;
        case 'r': got[gn++] = '\r'; i += 2; break;
        case 'b': got[gn++] = '\b'; i += 2; break;
        case 'f': got[gn++] = '\f'; i += 2; break;
        case 'u': {
            uint32_t c = 0;
            FUZZ_CHECK(i + 5 < n - 1, "short \\u escape");
            for (int k = 0; k < 4; k++) {
                int h = hexval(o[i + 2 + k]);
                FUZZ_CHECK(h >= 0, "bad \\u escape");
                c = c << 4 | (uint32_t)h;
            }
            FUZZ_CHECK(c < 0xd800 || c > 0xdfff, "surrogate escape \\u%04x", c);
            gn += put_utf8(got + gn, c);
            i += 6;
            break;
        }
        default: FUZZ_CHECK(0, "invalid JSON escape \\%c", o[i + 1]);
        }
    }
    FUZZ_CHECK(gn == wn && memcmp(got, want, wn) == 0,
               "JSON string decodes to %zu bytes, expected %zu", gn, wn);
    free(want);
    free(got);
}

/* Unescapes baton_gguf_escape's o[0..n) into u; returns its length, or
 * SIZE_MAX at an escape it does not write. */
static size_t unescape_message(const uint8_t *o, size_t n, uint8_t *u)
{
    size_t un = 0;
    for (size_t i = 0; i < n;) {
        if (o[i] != '\\') {
            u[un++] = o[i++];
        } else if (i + 1 < n && o[i + 1] == '\\') {
            u[un++] = '\\';
            i += 2;
        } else if (i + 3 < n && o[i + 1] == 'x' && hexval(o[i + 2]) >= 0 &&
                   hexval(o[i + 3]) >= 0) {
            u[un++] = (uint8_t)(hexval(o[i + 2]) << 4 | hexval(o[i + 3]));
            i += 4;
        } else {
            return SIZE_MAX;
        }
    }
    return un;
}

static void check_escape(const uint8_t *s, size_t len, size_t cap)
{
    char *dst = malloc(cap + 1);
    uint8_t *u = malloc(cap + 1);
    FUZZ_CHECK(dst != NULL && u != NULL, "malloc");
    dst[cap] = 'z';
    FUZZ_CHECK(baton_gguf_escape(dst, cap, s, len) == dst, "escape's result is not dst");
    FUZZ_CHECK(dst[cap] == 'z', "escape wrote past cap %zu", cap);
    const size_t n = strnlen(dst, cap);
    FUZZ_CHECK(n < cap, "escape's output of cap %zu is not terminated", cap);
    check_clean((const uint8_t *)dst, n);
    size_t un = unescape_message((const uint8_t *)dst, n, u);
    if (un == len && memcmp(u, s, len) == 0)
        goto out; /* whole */
    FUZZ_CHECK(cap < 4 * len + 1, "cut at cap %zu, enough for every escape", cap);
    if (cap < 4) {
        FUZZ_CHECK(n == 0, "cut below 4 bytes but not empty");
        goto out;
    }
    FUZZ_CHECK(n >= 3 && memcmp(dst + n - 3, "...", 3) == 0, "cut without \"...\" at cap %zu",
               cap);
    un = unescape_message((const uint8_t *)dst, n - 3, u);
    FUZZ_CHECK(un != SIZE_MAX && un < len && memcmp(u, s, un) == 0,
               "cut output is not a prefix of the string (cap %zu)", cap);
out:
    free(dst);
    free(u);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0)
        return 0;
    const int json = data[0] & 1;
    const size_t len = size - 1;
    uint8_t *s = fuzz_dup(data + 1, len);
    char *out = NULL;
    size_t n = 0;
    FILE *f = open_memstream(&out, &n);
    FUZZ_CHECK(f != NULL, "open_memstream");
    baton_cli_put_string(f, (const char *)s, len, json);
    FUZZ_CHECK(fclose(f) == 0, "fclose");

    check_clean((const uint8_t *)out, n);
    if (json)
        check_json(s, len, (const uint8_t *)out, n);
    else
        check_text(s, len, (const uint8_t *)out, n);
    static const size_t caps[] = {1, 3, 4, 5, 8, 11, 48, 80};
    for (size_t k = 0; k < sizeof caps / sizeof caps[0]; k++)
        check_escape(s, len, caps[k]);
    check_escape(s, len, 4 * len + 1);
    free(out);
    free(s);
    return 0;
}
