/* Lines of a stream of bytes (lines.h). */
#include "model/lines.h"

#include <string.h>

int baton_lines_next(struct baton_lines *s, const char *p, size_t have, int eof, size_t *off,
                     size_t *len, size_t *used)
{
    static const char bom[3] = {'\xef', '\xbb', '\xbf'};
    size_t at = 0, end;

    *off = *len = *used = 0;
    if (!s->begun) {
        if (have < 3 && !eof && (have == 0 || memcmp(p, bom, have) == 0))
            return 0; /* a byte order mark or a short first line: not known yet */
        s->begun = 1;
        if (have >= 3 && memcmp(p, bom, 3) == 0)
            at = 3;
    }
    if (s->after_cr && at < have) { /* CR LF: the LF ends the line the CR ended */
        s->after_cr = 0;
        if (p[at] == '\n')
            at++;
    }
    for (end = at; end < have && p[end] != '\n' && p[end] != '\r'; end++)
        ;
    if (end == have && (!eof || end == at)) {
        *used = at;
        return eof ? -1 : 0;
    }
    *off = at;
    *len = end - at;
    if (end < have) {
        s->after_cr = p[end] == '\r';
        end++;
    }
    *used = end;
    return 1;
}

int baton_lines_blank(const char *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (p[i] != ' ' && p[i] != '\t')
            return 0;
    return 1;
}
