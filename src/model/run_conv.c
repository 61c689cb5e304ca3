/* A conversation (run_internal.h, "run_conv.c"): `baton run --chat
 * --interactive` reads the user's messages, one a line, and answers each
 * with the turns before it still in the KV cache. run_parallel.c runs each
 * turn as a sequence of one slot whose prompt is the whole conversation so
 * far; only the tokens after the cells already written are prefilled. */
#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "baton/status.h"
#include "model/lines.h"
#include "model/run_internal.h"
#include "model/tokenizer.h"

struct run_conv {
    char *buf;         /* bytes read and not yet returned: [start, len) */
    size_t start, len, cap;
    int eof;
    double last_call;  /* run_now_s() of the last request to the stages */
    struct baton_lines lines; /* as --prompt-file's lines */
};


void run_conv_free(struct run *r)
{
    if (r->conv_in)
        free(r->conv_in->buf);
    free(r->conv_in);
    r->conv_in = NULL;
}

int run_keepalive(struct run *r)
{
    for (uint32_t i = 0; i < r->n_stages; i++) {
        struct baton_device_info info;
        const int rc = baton_device_info(r->stages[i].conn, &info);

        if (rc != 0) {
            stage_msg(r, "stage %u (%s): lost while waiting for the next %s: %s\n", i + 1,
                      r->stages[i].endpoint, r->serve ? "request" : "message",
                      baton_status_str(rc));
            return -1;
        }
    }
    return 0;
}

/* Reads more of cfg->chat_fd into the buffer (room for it made first). 0
 * (bytes added, or eof set), or -1 after a message. */
static int fill(struct run *r, struct run_conv *c)
{
    const int fd = r->cfg->chat_fd;

    if (c->start > 0) { /* what was returned goes */
        memmove(c->buf, c->buf + c->start, c->len - c->start);
        c->len -= c->start;
        c->start = 0;
    }
    if (c->cap - c->len < 4096) {
        const size_t cap = c->cap * 2;
        char *b = realloc(c->buf, cap);

        if (b == NULL) {
            stage_msg(r, "out of memory\n");
            return -1;
        }
        c->buf = b;
        c->cap = cap;
    }
    for (;;) {
        struct pollfd p = {fd, POLLIN, 0};
        const uint32_t ka = r->cfg->keepalive_s ? r->cfg->keepalive_s : 30;
        /* the keepalive is due ka seconds after the last request, however
         * many bytes have come in meanwhile (a line typed slowly) */
        const double left = c->last_call + (ka > 86400 ? 86400 : ka) - run_now_s();
        const int n = left <= 0 ? 0 : poll(&p, 1, (int)(left * 1000.0) + 1);
        ssize_t got;

        if (n < 0 && errno == EINTR)
            continue;
        if (n == 0) { /* the stages' connections kept open */
            if (run_keepalive(r) != 0)
                return -1;
            c->last_call = run_now_s();
            continue;
        }
        got = n < 0 ? -1 : read(fd, c->buf + c->len, c->cap - c->len);
        if (got < 0 && (errno == EINTR || errno == EAGAIN))
            continue;
        if (got < 0) {
            stage_msg(r, "cannot read the next message: %s\n", strerror(errno));
            return -1;
        }
        if (got == 0)
            c->eof = 1;
        c->len += (size_t)got;
        return 0;
    }
}

int run_conv_read(struct run *r, const char **msg, size_t *len)
{
    struct run_conv *c = r->conv_in;

    if (c == NULL) {
        c = r->conv_in = calloc(1, sizeof(*c));
        if (c != NULL) {
            c->cap = 65536;
            c->buf = malloc(c->cap);
        }
        if (c == NULL || c->buf == NULL) {
            stage_msg(r, "out of memory\n");
            return -1;
        }
    }
    c->last_call = run_now_s(); /* the turn before has just run */
    if (isatty(r->cfg->chat_fd)) {
        fputs("> ", r->cfg->log);
        fflush(r->cfg->log);
    }
    for (;;) {
        const char *p = c->buf + c->start;
        size_t off, n, used;
        const int got = baton_lines_next(&c->lines, p, c->len - c->start, c->eof, &off, &n, &used);

        c->start += used;
        if (got < 0) { /* the input ended: on a terminal, "> " ends its line */
            if (isatty(r->cfg->chat_fd))
                fputc('\n', r->cfg->log);
            return 0;
        }
        if (got == 0) {
            if (c->len - c->start > BATON_TOKENIZER_MAX_TEXT_BYTES)
                break;
            if (fill(r, c) != 0) /* moves the bytes to the buffer's start */
                return -1;
            continue;
        }
        if (baton_lines_blank(p + off, n))
            continue; /* a blank line */
        if (n > BATON_TOKENIZER_MAX_TEXT_BYTES)
            break;
        if (memchr(p + off, '\0', n) != NULL) { /* as --prompt-file refuses one */
            stage_msg(r, "a message holds a NUL byte: text cannot (the conversation ends)\n");
            return -1;
        }
        *msg = p + off;
        *len = n;
        return 1;
    }
    stage_msg(r, "a message is more than %u bytes (the tokenizer's limit)\n",
              BATON_TOKENIZER_MAX_TEXT_BYTES);
    return -1;
}

int run_conv_turn(struct run *r, const int32_t *prev, size_t n_prev, const char *msg,
                  size_t len, int32_t **ids, size_t *n_ids)
{
    const struct baton_run_config *cfg = r->cfg;
    struct baton_chat_prompt p;
    int32_t *turn = NULL, *all;
    size_t n = 0;
    int rc = n_prev == 0 ? baton_chat_format(r->chat_tmpl, cfg->chat_system, msg, len, &p)
                         : baton_chat_format_next(r->chat_tmpl, msg, len, &p);

    if (rc == 0)
        rc = run_tokenize_text(r, p.text, p.len,
                               n_prev > 0                         ? BATON_TOKENIZE_CONTINUE
                               : baton_tokenizer_add_bos(r->tok) ? BATON_TOKENIZE_ADD_BOS
                                                                  : 0u,
                               &p, &turn, &n);
    baton_chat_prompt_free(&p);
    if (rc == BATON_E_LIMIT) {
        stage_msg(r, "the message laid out as %s is more than %u bytes (the tokenizer's "
                     "limit)\n",
                  baton_chat_name(r->chat_tmpl), BATON_TOKENIZER_MAX_TEXT_BYTES);
        return 1;
    }
    if (rc != 0) {
        stage_msg(r, "cannot lay out the message: %s\n", baton_status_str(rc));
        return 1;
    }
    all = malloc((n_prev + n + 1) * sizeof(*all));
    if (all == NULL) {
        free(turn);
        stage_msg(r, "out of memory\n");
        return 1;
    }
    if (n_prev)
        memcpy(all, prev, n_prev * sizeof(*all));
    memcpy(all + n_prev, turn, n * sizeof(*all));
    free(turn);
    *ids = all;
    *n_ids = n_prev + n;
    return 0;
}
