/* Fuzz target prompt_lines: baton_cli_split_lines (src/cli/cli_lines.c,
 * compiled into this target), the splitter of `baton run --prompt-file`;
 * and baton_lines_next (src/model/lines.c, compiled in too), which splits
 * a conversation's messages as they arrive (`baton run --chat -i`).
 *
 * Input: the file's bytes, as is. The splitter gets an exact-size heap copy
 * with no terminator, so a read past len is a heap overflow under ASan.
 *
 * The oracle, written here from cli.h another way: drop a UTF-8 BOM
 * (EF BB BF) at the start, rewrite every CR LF and then every CR left as
 * LF, and split that text at LF (a last line without LF counts); blank lines
 * (empty, or only spaces and tabs) are skipped; a NUL byte in a line is
 * BATON_E_FORMAT naming that line, counting every line, blank ones too;
 * more than BATON_CLI_MAX_LINES lines BATON_E_LIMIT.
 * Properties:
 *   - the status is the oracle's; on success the lines are the oracle's, in
 *     order, each NUL-terminated with no NUL, CR or LF inside; on error out
 *     holds nothing and *bad_line is the oracle's line;
 *   - the same call twice gives the same result;
 *   - the lines joined with LF, and joined with CR LF behind a BOM, split
 *     again give the same lines (joined with LF behind a BOM too when the
 *     first line begins with one);
 *   - baton_lines_next over the input given whole, a byte at a time, and in
 *     pieces of 1..8 bytes (sizes from the input's own bytes) finds every
 *     line of the oracle's text, blank ones and ones with a NUL too, in
 *     order, each as soon as its end has arrived (it asks for more bytes
 *     only before the input's end), and consumes no byte twice.
 */
#include "fuzz_common.h"

#include "baton/status.h"
#include "cli/cli.h"
#include "model/lines.h"

static int is_blank(const uint8_t *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (p[i] != ' ' && p[i] != '\t')
            return 0;
    return 1;
}

/* The text with the BOM dropped and every line ending made one LF, into a
 * new block (*out_n bytes; free it). */
static uint8_t *normalize(const uint8_t *d, size_t n, size_t *out_n)
{
    uint8_t *t = malloc(n > 0 ? n : 1);
    size_t i = 0, k = 0;

    if (t == NULL)
        abort();
    if (n >= 3 && d[0] == 0xEF && d[1] == 0xBB && d[2] == 0xBF)
        i = 3;
    for (; i < n; i++) {
        if (d[i] == '\r' && i + 1 < n && d[i + 1] == '\n')
            continue; /* the LF after it ends the line */
        t[k++] = d[i] == '\r' ? '\n' : d[i];
    }
    *out_n = k;
    return t;
}

/* The oracle over normalized text t[0, n): expected status, line count and
 * bad line. The lines themselves are compared while walking t again. */
static int oracle(const uint8_t *t, size_t n, size_t *n_lines, size_t *bad)
{
    size_t at = 0, lineno = 0;

    *n_lines = 0;
    *bad = 0;
    while (at < n) {
        size_t end = at, len;

        while (end < n && t[end] != '\n')
            end++;
        lineno++;
        len = end - at;
        for (size_t i = 0; i < len; i++)
            if (t[at + i] == 0) {
                *bad = lineno;
                *n_lines = 0;
                return BATON_E_FORMAT;
            }
        if (!is_blank(t + at, len)) {
            if (*n_lines == BATON_CLI_MAX_LINES) {
                *bad = lineno;
                *n_lines = 0;
                return BATON_E_LIMIT;
            }
            (*n_lines)++;
        }
        at = end < n ? end + 1 : n;
    }
    return 0;
}

/* The lines of a joined again with sep (and a BOM first when bom), split:
 * the same lines. */
static void rejoin(const struct baton_cli_lines *a, const char *sep, int bom)
{
    const size_t sep_len = strlen(sep);
    size_t total = bom ? 3 : 0, at = 0, bad = 0;
    struct baton_cli_lines c;
    uint8_t *joined;

    for (size_t k = 0; k < a->n; k++)
        total += strlen(a->line[k]) + sep_len;
    joined = malloc(total ? total : 1);
    if (joined == NULL)
        abort();
    if (bom) {
        memcpy(joined, "\xEF\xBB\xBF", 3);
        at = 3;
    }
    for (size_t k = 0; k < a->n; k++) {
        const size_t len = strlen(a->line[k]);

        memcpy(joined + at, a->line[k], len);
        memcpy(joined + at + len, sep, sep_len);
        at += len + sep_len;
    }
    FUZZ_CHECK(baton_cli_split_lines((const char *)joined, at, &c, &bad) == 0 && c.n == a->n,
               "joined again with %s: %zu lines", sep_len == 1 ? "LF" : "CR LF", c.n);
    for (size_t k = 0; k < a->n; k++)
        FUZZ_CHECK(strcmp(a->line[k], c.line[k]) == 0, "joined again: line %zu", k + 1);
    baton_cli_lines_free(&c);
    free(joined);
}

/* baton_lines_next over d[0, size) in pieces (mode 0: whole, 1: a byte at
 * a time, 2: 1..8 bytes from d itself) against the normalized text
 * t[0, tn): the same lines, all of them. */
static void check_stream(const uint8_t *d, size_t size, const uint8_t *t, size_t tn, int mode)
{
    struct baton_lines s = {0};
    size_t start = 0, delivered = 0, at = 0, k = 0, pieces = 0;

    for (;;) {
        size_t off = 0, len = 0, used = 0;
        const int eof = delivered == size;
        const int got = baton_lines_next(&s, (const char *)d + start, delivered - start, eof,
                                         &off, &len, &used);

        FUZZ_CHECK(used <= delivered - start, "stream %d: used %zu of %zu", mode, used,
                   delivered - start);
        if (got == 1) {
            size_t end = at;

            FUZZ_CHECK(at < tn, "stream %d: line %zu past the text's lines", mode, k + 1);
            while (end < tn && t[end] != '\n')
                end++;
            FUZZ_CHECK(off + len <= used && end - at == len &&
                           memcmp(t + at, d + start + off, len) == 0,
                       "stream %d: line %zu differs", mode, k + 1);
            at = end < tn ? end + 1 : tn;
            k++;
        }
        start += used;
        if (got < 0)
            break;
        if (got == 0) {
            size_t piece = mode == 0 ? size : mode == 1 ? 1 : 1u + (size_t)(d[pieces++ % size] & 7);

            FUZZ_CHECK(!eof, "stream %d: more bytes wanted at the end", mode);
            delivered += piece < size - delivered ? piece : size - delivered;
        }
    }
    FUZZ_CHECK(at == tn, "stream %d: %zu lines, the text has more", mode, k);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    uint8_t *exact = fuzz_dup(data, size);
    struct baton_cli_lines a, b;
    size_t want_n, want_bad, bad_a = 99, bad_b = 99, tn;
    uint8_t *t = normalize(data, size, &tn);
    const int want = oracle(t, tn, &want_n, &want_bad);
    int rc_a = baton_cli_split_lines((const char *)exact, size, &a, &bad_a);
    int rc_b = baton_cli_split_lines((const char *)exact, size, &b, &bad_b);

    FUZZ_CHECK(rc_a == want, "status %d, oracle %d", rc_a, want);
    for (int mode = 0; mode < 3; mode++)
        check_stream(exact, size, t, tn, mode);
    FUZZ_CHECK(rc_a == rc_b && bad_a == bad_b && a.n == b.n, "not deterministic");
    if (rc_a != 0) {
        FUZZ_CHECK(a.n == 0 && a.line == NULL, "lines left on error");
        FUZZ_CHECK(bad_a == want_bad, "bad line %zu, oracle %zu", bad_a, want_bad);
    } else {
        size_t at = 0, k = 0;

        FUZZ_CHECK(a.n == want_n, "%zu lines, oracle %zu", a.n, want_n);
        /* walk the normalized text: the k-th non-blank line equals a.line[k] */
        while (at < tn) {
            size_t end = at, len;

            while (end < tn && t[end] != '\n')
                end++;
            len = end - at;
            if (!is_blank(t + at, len)) {
                FUZZ_CHECK(k < a.n, "more lines than returned");
                FUZZ_CHECK(strlen(a.line[k]) == len && memcmp(a.line[k], t + at, len) == 0,
                           "line %zu differs", k + 1);
                FUZZ_CHECK(strchr(a.line[k], '\r') == NULL && strchr(a.line[k], '\n') == NULL,
                           "line %zu holds a CR or an LF", k + 1);
                FUZZ_CHECK(strcmp(a.line[k], b.line[k]) == 0, "not deterministic: line %zu", k);
                k++;
            }
            at = end < tn ? end + 1 : tn;
        }
        FUZZ_CHECK(k == a.n, "%zu lines walked, %zu returned", k, a.n);
        /* plain LF, but behind a BOM when the first line begins with one
         * (a BOM that was not the file's first bytes): without it, the
         * split would take the line's as the file's */
        rejoin(&a, "\n", a.n > 0 && strncmp(a.line[0], "\xEF\xBB\xBF", 3) == 0);
        rejoin(&a, "\r\n", 1);
    }
    baton_cli_lines_free(&a);
    baton_cli_lines_free(&b);
    free(t);
    free(exact);
    return 0;
}
