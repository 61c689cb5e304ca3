/* --prompt-file: a text of lines into prompts (cli.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "baton/status.h"
#include "cli/cli.h"

void baton_cli_lines_free(struct baton_cli_lines *l)
{
    for (size_t i = 0; l && i < l->n; i++)
        free(l->line[i]);
    if (l) {
        free(l->line);
        l->line = NULL;
        l->n = 0;
    }
}

/* Whether p[0, n) holds only spaces and tabs (or nothing). */
static int blank(const char *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (p[i] != ' ' && p[i] != '\t')
            return 0;
    return 1;
}

int baton_cli_split_lines(const char *buf, size_t len, struct baton_cli_lines *out,
                          size_t *bad_line)
{
    size_t at = 0, lineno = 0, cap = 0;

    out->line = NULL;
    out->n = 0;
    *bad_line = 0;
    /* a UTF-8 byte order mark that editors on Windows put first is not text
     * of the first prompt */
    if (len >= 3 && (unsigned char)buf[0] == 0xEF && (unsigned char)buf[1] == 0xBB &&
        (unsigned char)buf[2] == 0xBF)
        at = 3;
    while (at < len) {
        size_t end = at, n, next;
        char *s;

        /* a line ends at LF, CR LF, a CR alone (old Mac files) or the end */
        while (end < len && buf[end] != '\n' && buf[end] != '\r')
            end++;
        n = end - at;
        if (end == len)
            next = len;
        else if (buf[end] == '\r' && end + 1 < len && buf[end + 1] == '\n')
            next = end + 2; /* CR LF */
        else
            next = end + 1;
        lineno++;
        if (memchr(buf + at, '\0', n) != NULL) {
            *bad_line = lineno;
            baton_cli_lines_free(out);
            return BATON_E_FORMAT;
        }
        if (!blank(buf + at, n)) {
            if (out->n == BATON_CLI_MAX_LINES) {
                *bad_line = lineno;
                baton_cli_lines_free(out);
                return BATON_E_LIMIT;
            }
            if (out->n == cap) {
                size_t nc = cap ? cap * 2 : 16;
                char **p = realloc(out->line, nc * sizeof(*p));

                if (p == NULL) {
                    baton_cli_lines_free(out);
                    return BATON_E_NOMEM;
                }
                out->line = p;
                cap = nc;
            }
            s = malloc(n + 1);
            if (s == NULL) {
                baton_cli_lines_free(out);
                return BATON_E_NOMEM;
            }
            memcpy(s, buf + at, n);
            s[n] = '\0';
            out->line[out->n++] = s;
        }
        at = next;
    }
    return 0;
}

int baton_cli_read_lines(const char *prog, const char *what, const char *path,
                         struct baton_cli_lines *out)
{
    FILE *f = fopen(path, "rb");
    char *buf = NULL;
    size_t len = 0, cap = 0, bad = 0;
    int rc;

    out->line = NULL;
    out->n = 0;
    if (f == NULL) {
        fprintf(stderr, "%s: %s %s: %s\n", prog, what, path, strerror(errno));
        return 1;
    }
    for (;;) {
        size_t got;

        if (len == cap) {
            char *p;

            if (cap > BATON_CLI_MAX_FILE) { /* one byte past the limit was read */
                fprintf(stderr, "%s: %s %s: larger than %u MiB\n", prog, what, path,
                        (unsigned)(BATON_CLI_MAX_FILE >> 20));
                free(buf);
                fclose(f);
                return 2;
            }
            cap = cap ? cap * 2 : 65536;
            if (cap > BATON_CLI_MAX_FILE)
                cap = BATON_CLI_MAX_FILE + 1; /* room to find the limit exceeded */
            p = realloc(buf, cap);
            if (p == NULL) {
                fprintf(stderr, "%s: %s %s: out of memory\n", prog, what, path);
                free(buf);
                fclose(f);
                return 1;
            }
            buf = p;
        }
        got = fread(buf + len, 1, cap - len, f);
        len += got;
        if (got == 0)
            break;
    }
    if (ferror(f)) {
        fprintf(stderr, "%s: %s %s: %s\n", prog, what, path, strerror(errno));
        free(buf);
        fclose(f);
        return 1;
    }
    fclose(f);
    rc = baton_cli_split_lines(buf ? buf : "", len, out, &bad);
    free(buf);
    if (rc == BATON_E_FORMAT) {
        fprintf(stderr, "%s: %s %s: line %zu holds a NUL byte\n", prog, what, path, bad);
        return 2;
    }
    if (rc == BATON_E_LIMIT) {
        fprintf(stderr, "%s: %s %s: more than %u prompts (line %zu)\n", prog, what, path,
                BATON_CLI_MAX_LINES, bad);
        return 2;
    }
    if (rc != 0) {
        fprintf(stderr, "%s: %s %s: out of memory\n", prog, what, path);
        return 1;
    }
    if (out->n == 0) {
        fprintf(stderr, "%s: %s %s: no prompts (one per line; blank lines are skipped)\n", prog,
                what, path);
        return 2;
    }
    return 0;
}
