/* --prompt-file: a text of lines into prompts (cli.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "baton/status.h"
#include "cli/cli.h"
#include "model/lines.h"

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

int baton_cli_split_lines(const char *buf, size_t len, struct baton_cli_lines *out,
                          size_t *bad_line)
{
    struct baton_lines split = {0}; /* a BOM skipped; LF, CR LF or a CR alone (model/lines.h) */
    size_t at = 0, lineno = 0, cap = 0, off, n, used;

    out->line = NULL;
    out->n = 0;
    *bad_line = 0;
    while (len > 0 && baton_lines_next(&split, buf + at, len - at, 1, &off, &n, &used) == 1) {
        const char *p = buf + at + off;
        char *s;

        at += used;
        lineno++;
        if (memchr(p, '\0', n) != NULL) {
            *bad_line = lineno;
            baton_cli_lines_free(out);
            return BATON_E_FORMAT;
        }
        if (baton_lines_blank(p, n))
            continue;
        if (out->n == BATON_CLI_MAX_LINES) {
            *bad_line = lineno;
            baton_cli_lines_free(out);
            return BATON_E_LIMIT;
        }
        if (out->n == cap) {
            size_t nc = cap ? cap * 2 : 16;
            char **l = realloc(out->line, nc * sizeof(*l));

            if (l == NULL) {
                baton_cli_lines_free(out);
                return BATON_E_NOMEM;
            }
            out->line = l;
            cap = nc;
        }
        s = malloc(n + 1);
        if (s == NULL) {
            baton_cli_lines_free(out);
            return BATON_E_NOMEM;
        }
        memcpy(s, p, n);
        s[n] = '\0';
        out->line[out->n++] = s;
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
