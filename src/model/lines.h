/* Lines of a stream of bytes, split as `baton run --prompt-file` splits a
 * file (src/cli/cli_lines.c): a UTF-8 byte order mark at the start is
 * skipped, and a line ends at LF, CR LF, a CR alone, or the end of the
 * input. For a conversation's messages (`baton run --chat --interactive`,
 * run_conv.c), which arrive a few bytes at a time: a line is found as soon
 * as its end has arrived (a CR ends it at once; an LF right after it is
 * then dropped as the rest of that end). cli_lines.c splits a whole file
 * with it (eof from the start); fuzz/fuzz_prompt_lines.c checks both
 * against its own oracle, over any split of the input into pieces. */
#ifndef BATON_MODEL_LINES_H
#define BATON_MODEL_LINES_H

#include <stddef.h>

/* A splitter's state; zeroed at the input's start. */
struct baton_lines {
    int begun;    /* the input's first bytes were looked at (a byte order mark) */
    int after_cr; /* the last line ended at a CR: an LF next is part of its end */
};

/* The next line in p[0, have): the bytes not consumed yet (p may be NULL
 * when have is 0); eof: no more will come. Returns 1 with the line at
 * p[*off, *off + *len) (any bytes but CR and LF; a blank line too) and
 * *used the bytes it consumed, its end included; 0 when more bytes are
 * needed (never with eof), *used bytes consumed all the same (a byte order
 * mark, an LF after a CR); -1 when eof and nothing is left (*used as for
 * 0). */
int baton_lines_next(struct baton_lines *s, const char *p, size_t have, int eof, size_t *off,
                     size_t *len, size_t *used);

/* Whether p[0, n) is a blank line: empty, or spaces and tabs only (both
 * splitters skip such lines). */
int baton_lines_blank(const char *p, size_t n);

#endif
