/* Fuzz target prompt_lines: baton_cli_split_lines (src/cli/cli_lines.c,
 * compiled into this target), the splitter of `baton run --prompt-file`.
 *
 * Input: the file's bytes, as is. The splitter gets an exact-size heap copy
 * with no terminator, so a read past len is a heap overflow under ASan.
 *
 * Properties, against an oracle written here from cli.h (lines end at LF or
 * at the end; one CR before an LF or the end is dropped; blank lines (empty
 * or only spaces, tabs and CRs) are skipped; a NUL byte in a line is BATON_E_FORMAT naming that line,
 * counting every line, empty ones too):
 *   - the status is the oracle's; on success the lines are the oracle's, in
 *     order, each NUL-terminated with no NUL, LF or final CR inside; on
 *     error out holds nothing and *bad_line is the oracle's line;
 *   - the same call twice gives the same result;
 *   - the lines joined with LF and split again give the same lines, unless
 *     a line ends in CR (its text had CR CR LF: joined, that CR goes too).
 */
#include "fuzz_common.h"

#include "baton/status.h"
#include "cli/cli.h"

static int is_blank(const uint8_t *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (p[i] != ' ' && p[i] != '\t' && p[i] != '\r')
            return 0;
    return 1;
}

/* The oracle: expected status, line count and bad line. The lines
 * themselves are compared while walking the text again. */
static int oracle(const uint8_t *d, size_t n, size_t *n_lines, size_t *bad)
{
    size_t at = 0, lineno = 0;

    *n_lines = 0;
    *bad = 0;
    while (at < n) {
        size_t end = at, len;

        while (end < n && d[end] != '\n')
            end++;
        lineno++;
        len = end - at;
        if (len > 0 && d[at + len - 1] == '\r')
            len--;
        for (size_t i = 0; i < len; i++)
            if (d[at + i] == 0) {
                *bad = lineno;
                *n_lines = 0;
                return BATON_E_FORMAT;
            }
        if (!is_blank(d + at, len)) {
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

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    uint8_t *exact = fuzz_dup(data, size);
    struct baton_cli_lines a, b;
    size_t want_n, want_bad, bad_a = 99, bad_b = 99;
    const int want = oracle(data, size, &want_n, &want_bad);
    int rc_a = baton_cli_split_lines((const char *)exact, size, &a, &bad_a);
    int rc_b = baton_cli_split_lines((const char *)exact, size, &b, &bad_b);

    FUZZ_CHECK(rc_a == want, "status %d, oracle %d", rc_a, want);
    FUZZ_CHECK(rc_a == rc_b && bad_a == bad_b && a.n == b.n, "not deterministic");
    if (rc_a != 0) {
        FUZZ_CHECK(a.n == 0 && a.line == NULL, "lines left on error");
        FUZZ_CHECK(bad_a == want_bad, "bad line %zu, oracle %zu", bad_a, want_bad);
    } else {
        size_t at = 0, k = 0, joined_len = 0;
        char *joined;
        struct baton_cli_lines c;
        size_t bad_c = 0;

        FUZZ_CHECK(a.n == want_n, "%zu lines, oracle %zu", a.n, want_n);
        /* walk the text: the k-th non-empty line equals a.line[k] */
        while (at < size) {
            size_t end = at, len;

            while (end < size && data[end] != '\n')
                end++;
            len = end - at;
            if (len > 0 && data[at + len - 1] == '\r')
                len--;
            if (!is_blank(data + at, len)) {
                FUZZ_CHECK(k < a.n, "more lines than returned");
                FUZZ_CHECK(strlen(a.line[k]) == len && memcmp(a.line[k], data + at, len) == 0,
                           "line %zu differs", k + 1);
                FUZZ_CHECK(strcmp(a.line[k], b.line[k]) == 0, "not deterministic: line %zu", k);
                joined_len += len + 1;
                k++;
            }
            at = end < size ? end + 1 : size;
        }
        FUZZ_CHECK(k == a.n, "%zu lines walked, %zu returned", k, a.n);
        /* joined again with LF: the same lines (a line ending in CR would
         * lose it: not compared) */
        for (k = 0; k < a.n; k++)
            if (a.line[k][strlen(a.line[k]) - 1] == '\r')
                break;
        if (k < a.n)
            goto done;
        joined = malloc(joined_len ? joined_len : 1);
        if (joined == NULL)
            abort();
        at = 0;
        for (k = 0; k < a.n; k++) {
            size_t len = strlen(a.line[k]);

            memcpy(joined + at, a.line[k], len);
            joined[at + len] = '\n';
            at += len + 1;
        }
        FUZZ_CHECK(baton_cli_split_lines(joined, at, &c, &bad_c) == 0 && c.n == a.n,
                   "joined again: %zu lines", c.n);
        for (k = 0; k < a.n; k++)
            FUZZ_CHECK(strcmp(a.line[k], c.line[k]) == 0, "joined again: line %zu", k + 1);
        baton_cli_lines_free(&c);
        free(joined);
    }
done:
    baton_cli_lines_free(&a);
    baton_cli_lines_free(&b);
    free(exact);
    return 0;
}
