/* Fuzz target serve_req: baton_serve_req_parse, the JSON body of a
 * `baton serve` request (src/model/serve_req.c, compiled into this target
 * with baton_core and jansson linked), baton_serve_tok_parse (the bodies of
 * /tokenize and /detokenize), and the UTF-8 rules of a reply's text,
 * baton_serve_utf8_complete and baton_serve_utf8_clean.
 *
 * Input: byte 0 bit 1 clear: a completion request, bit 0 = chat (messages)
 * or completion (prompt); bit 1 set: /tokenize (bit 0 clear) or
 * /detokenize (bit 0 set); the rest is the body, as is (an exact-size heap
 * copy with no terminator).
 *
 * /tokenize and /detokenize: the same status twice, the same fields; on
 * error the message rules below and *req all zero; on success content is
 * jansson's "content" string (NUL-terminated, valid UTF-8, within the text
 * limit), each flag is jansson's boolean or its default (add_special
 * false, parse_special true, with_pieces false), tokens are jansson's
 * integers (0..2^31-1, at most BATON_SERVE_MAX_DETOKENIZE), and the other
 * request's fields are empty.
 *
 * Properties:
 *   - the status is 0, E_FORMAT, E_UNSUPPORTED, E_LIMIT or E_NOMEM; the same
 *     call twice gives the same status, message and fields; a small err
 *     buffer (1 and 9 bytes) or none gives the same status, the message
 *     truncated inside it;
 *   - on error: the message is one non-empty line of printable ASCII (it
 *     names a field, never quotes the body) and *req is all zero bytes;
 *   - on success: each text is NUL-terminated, strlen == its len, valid
 *     UTF-8 (checked by the decoder below, written from the code-point
 *     arithmetic rather than Table 3-7's rows); the texts together hold at
 *     most BATON_TOKENIZER_MAX_TEXT_BYTES; every number is in its range, and
 *     a field not given is 0; chat: 1..BATON_SERVE_MAX_MESSAGES messages, a
 *     system message only first, then user and assistant in turn starting
 *     and ending with a user's; 0..BATON_SERVE_MAX_STOP stop strings, each
 *     1..BATON_SERVE_MAX_STOP_BYTES bytes, NUL-terminated and valid UTF-8,
 *     the slots past them empty; the prompt, max_tokens and the stop strings
 *     equal what jansson itself reads from the body;
 *   - clean(body): NUL-terminated, no NUL inside, valid UTF-8 by the decoder
 *     below, at most 3 bytes per input byte, the body itself when the body
 *     was valid UTF-8 without NUL; clean(clean(body)) == clean(body);
 *   - c = complete(body): c <= n and n - c <= 3; clean(body[0, c]) followed
 *     by clean(body[c, n)) is clean(body); when c < n the rest is one
 *     U+FFFD when cleaned; the body streamed in pieces of 1..8 bytes (sizes
 *     from the body's own bytes), each time sending clean(pending[0,
 *     complete]) and keeping the rest, then the rest cleaned at the end,
 *     gives clean(body).
 */
#include "fuzz_common.h"

#include <jansson.h>

#include "baton/status.h"
#include "model/serve_req.h"
#include "model/tokenizer.h"

/* Whether p[0, n) is valid UTF-8 (and, when no_nul, holds no NUL): each
 * sequence decoded to its code point, which must need exactly that many
 * bytes, be at most U+10FFFF and not a surrogate. */
static int utf8_ok(const uint8_t *p, size_t n, int no_nul)
{
    size_t i = 0;

    while (i < n) {
        uint32_t cp;
        size_t len;

        if (p[i] < 0x80) {
            if (no_nul && p[i] == 0)
                return 0;
            i++;
            continue;
        }
        if ((p[i] & 0xE0) == 0xC0) {
            len = 2;
            cp = p[i] & 0x1Fu;
        } else if ((p[i] & 0xF0) == 0xE0) {
            len = 3;
            cp = p[i] & 0x0Fu;
        } else if ((p[i] & 0xF8) == 0xF0) {
            len = 4;
            cp = p[i] & 0x07u;
        } else {
            return 0;
        }
        if (n - i < len)
            return 0;
        for (size_t k = 1; k < len; k++) {
            if ((p[i + k] & 0xC0) != 0x80)
                return 0;
            cp = cp * 64 + (p[i + k] & 0x3Fu);
        }
        if ((len == 2 && cp < 0x80) || (len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000))
            return 0; /* overlong */
        if (cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
            return 0;
        i += len;
    }
    return 1;
}

static void check_text(const char *t, size_t len, const char *what)
{
    FUZZ_CHECK(t != NULL, "%s: no text", what);
    FUZZ_CHECK(strlen(t) == len, "%s: strlen %zu, len %zu", what, strlen(t), len);
    FUZZ_CHECK(utf8_ok((const uint8_t *)t, len, 1), "%s: not valid UTF-8", what);
}

static int same_req(const struct baton_serve_req *a, const struct baton_serve_req *b)
{
    if (a->chat != b->chat || a->prompt_len != b->prompt_len || a->n_msgs != b->n_msgs ||
        a->max_tokens != b->max_tokens || a->has_max_tokens != b->has_max_tokens ||
        memcmp(&a->temperature, &b->temperature, sizeof a->temperature) != 0 ||
        a->has_temperature != b->has_temperature ||
        memcmp(&a->top_p, &b->top_p, sizeof a->top_p) != 0 || a->has_top_p != b->has_top_p ||
        a->top_k != b->top_k || a->has_top_k != b->has_top_k || a->seed != b->seed ||
        a->has_seed != b->has_seed || a->stream != b->stream)
        return 0;
    if ((a->prompt == NULL) != (b->prompt == NULL) ||
        (a->prompt != NULL && strcmp(a->prompt, b->prompt) != 0))
        return 0;
    for (size_t i = 0; i < a->n_msgs; i++)
        if (a->msgs[i].role != b->msgs[i].role || a->msgs[i].len != b->msgs[i].len ||
            strcmp(a->msgs[i].text, b->msgs[i].text) != 0)
            return 0;
    if (a->n_stop != b->n_stop)
        return 0;
    for (size_t i = 0; i < a->n_stop; i++)
        if (a->stop_len[i] != b->stop_len[i] || strcmp(a->stop[i], b->stop[i]) != 0)
            return 0;
    return 1;
}

/* jansson's own reading of the body: the prompt, the max_tokens given and
 * the stop strings (one string, or an array's strings in order). */
static void check_against_jansson(const uint8_t *body, size_t n, const struct baton_serve_req *r)
{
    static const char *const names[] = {"max_tokens", "max_completion_tokens", "n_predict"};
    json_t *root = json_loadb((const char *)body, n, JSON_REJECT_DUPLICATES, NULL);
    int given = 0;

    FUZZ_CHECK(root != NULL && json_is_object(root), "accepted, but not a JSON object");
    if (!r->chat) {
        json_t *p = json_object_get(root, "prompt");

        if (json_is_array(p))
            p = json_array_get(p, 0);
        FUZZ_CHECK(json_is_string(p) && json_string_length(p) == r->prompt_len &&
                       memcmp(json_string_value(p), r->prompt, r->prompt_len) == 0,
                   "the prompt is not jansson's");
    }
    for (size_t i = 0; i < 3; i++) {
        json_t *v = json_object_get(root, names[i]);

        if (v == NULL || json_is_null(v))
            continue;
        given++;
        FUZZ_CHECK(json_is_integer(v) && json_integer_value(v) == (json_int_t)r->max_tokens,
                   "\"%s\" is not jansson's", names[i]);
    }
    FUZZ_CHECK(given == r->has_max_tokens, "%d max_tokens fields, has %d", given,
               r->has_max_tokens);
    {
        json_t *v = json_object_get(root, "stop");
        const size_t n_given = json_is_string(v) ? 1 : json_is_array(v) ? json_array_size(v) : 0;
        size_t n_stop = 0; /* jansson's non-empty strings, in order (empty ones are ignored) */

        FUZZ_CHECK(v == NULL || json_is_null(v) || json_is_string(v) || json_is_array(v),
                   "\"stop\" of another type accepted");
        for (size_t i = 0; i < n_given; i++) {
            json_t *s = json_is_string(v) ? v : json_array_get(v, i);

            FUZZ_CHECK(json_is_string(s), "stop entry %zu is not a string", i);
            if (json_string_length(s) == 0)
                continue;
            FUZZ_CHECK(n_stop < r->n_stop && json_string_length(s) == r->stop_len[n_stop] &&
                           memcmp(json_string_value(s), r->stop[n_stop], r->stop_len[n_stop]) == 0,
                       "stop string %zu is not jansson's", n_stop);
            n_stop++;
        }
        FUZZ_CHECK(n_stop == r->n_stop, "%zu stop strings, jansson reads %zu", r->n_stop,
                   n_stop);
    }
    json_decref(root);
}

static void check_success(const uint8_t *body, size_t n, int chat,
                          const struct baton_serve_req *r)
{
    size_t total = 0;

    FUZZ_CHECK(r->chat == chat, "chat %d, asked %d", r->chat, chat);
    if (!chat) {
        check_text(r->prompt, r->prompt_len, "prompt");
        total = r->prompt_len;
        FUZZ_CHECK(r->msgs == NULL && r->n_msgs == 0, "messages in a completion");
    } else {
        FUZZ_CHECK(r->prompt == NULL && r->prompt_len == 0, "a prompt in a chat");
        FUZZ_CHECK(r->n_msgs >= 1 && r->n_msgs <= BATON_SERVE_MAX_MESSAGES && r->msgs != NULL,
                   "%zu messages", r->n_msgs);
        for (size_t i = 0; i < r->n_msgs; i++) {
            const enum baton_serve_role role = r->msgs[i].role;
            /* what may stand here: the order rules, from the header */
            const int first_turn = i == 0 || (i == 1 && r->msgs[0].role == BATON_SERVE_SYSTEM);

            check_text(r->msgs[i].text, r->msgs[i].len, "message");
            FUZZ_CHECK(total <= SIZE_MAX - r->msgs[i].len, "lengths wrap");
            total += r->msgs[i].len;
            if (role == BATON_SERVE_SYSTEM)
                FUZZ_CHECK(i == 0, "messages[%zu]: a system message not first", i);
            else if (first_turn)
                FUZZ_CHECK(role == BATON_SERVE_USER, "messages[%zu]: first turn not a user's", i);
            else
                FUZZ_CHECK((role == BATON_SERVE_USER || role == BATON_SERVE_ASSISTANT) &&
                               role != r->msgs[i - 1].role,
                           "messages[%zu]: role %d after %d", i, (int)role,
                           (int)r->msgs[i - 1].role);
        }
        FUZZ_CHECK(r->msgs[r->n_msgs - 1].role == BATON_SERVE_USER, "the last is not a user's");
    }
    FUZZ_CHECK(total <= BATON_TOKENIZER_MAX_TEXT_BYTES, "%zu text bytes", total);
    FUZZ_CHECK(r->n_stop <= BATON_SERVE_MAX_STOP, "%zu stop strings", r->n_stop);
    for (size_t i = 0; i < BATON_SERVE_MAX_STOP; i++) {
        if (i >= r->n_stop) {
            FUZZ_CHECK(r->stop[i] == NULL && r->stop_len[i] == 0, "stop[%zu] past n_stop", i);
            continue;
        }
        check_text(r->stop[i], r->stop_len[i], "stop string");
        FUZZ_CHECK(r->stop_len[i] >= 1 && r->stop_len[i] <= BATON_SERVE_MAX_STOP_BYTES,
                   "stop[%zu]: %zu bytes", i, r->stop_len[i]);
    }
    FUZZ_CHECK(r->has_max_tokens ? r->max_tokens >= 1 && r->max_tokens <= INT32_MAX
                                 : r->max_tokens == 0,
               "max_tokens %u", r->max_tokens);
    FUZZ_CHECK(r->has_temperature ? r->temperature >= 0 && r->temperature <= 100
                                  : r->temperature == 0,
               "temperature %g", (double)r->temperature);
    FUZZ_CHECK(r->has_top_p ? r->top_p > 0 && r->top_p <= 1 : r->top_p == 0, "top_p %g",
               (double)r->top_p);
    FUZZ_CHECK(r->has_top_k ? r->top_k <= INT32_MAX : r->top_k == 0, "top_k %u", r->top_k);
    FUZZ_CHECK(r->has_seed ? r->seed <= INT64_MAX : r->seed == 0, "seed");
    FUZZ_CHECK((r->has_max_tokens | r->has_temperature | r->has_top_p | r->has_top_k |
                r->has_seed | r->stream) <= 1,
               "a flag not 0 or 1");
    check_against_jansson(body, n, r);
}

static void check_error(int rc, const char *err, const struct baton_serve_req *r)
{
    static const struct baton_serve_req zero;

    FUZZ_CHECK(rc == BATON_E_FORMAT || rc == BATON_E_UNSUPPORTED || rc == BATON_E_LIMIT ||
                   rc == BATON_E_NOMEM,
               "status %d", rc);
    FUZZ_CHECK(err[0] != 0, "status %d with no message", rc);
    for (const char *c = err; *c; c++)
        FUZZ_CHECK(*c >= 0x20 && *c < 0x7F, "the message holds byte 0x%02x", (uint8_t)*c);
    FUZZ_CHECK(memcmp(r, &zero, sizeof zero) == 0, "*req not zeroed on error");
}

/* A flag's value as jansson reads it: the boolean, or def when absent or
 * null. */
static int jansson_flag(json_t *root, const char *key, int def)
{
    json_t *v = json_object_get(root, key);

    return v == NULL || json_is_null(v) ? def : json_is_true(v);
}

static void check_tok(const uint8_t *body, size_t n, int detok)
{
    static const struct baton_serve_tok_req zero;
    struct baton_serve_tok_req a, b, small;
    char err_a[256], err_b[256], err_small[9];
    int rc_a, rc_b, rc_small;

    rc_a = baton_serve_tok_parse((const char *)body, n, detok, &a, err_a, sizeof err_a);
    rc_b = baton_serve_tok_parse((const char *)body, n, detok, &b, err_b, sizeof err_b);
    FUZZ_CHECK(rc_a == rc_b, "tok: status %d, then %d", rc_a, rc_b);
    if (rc_a != 0) {
        FUZZ_CHECK(rc_a == BATON_E_FORMAT || rc_a == BATON_E_LIMIT || rc_a == BATON_E_NOMEM,
                   "tok: status %d", rc_a);
        FUZZ_CHECK(err_a[0] != 0 && strcmp(err_a, err_b) == 0, "tok: messages");
        for (const char *c = err_a; *c; c++)
            FUZZ_CHECK(*c >= 0x20 && *c < 0x7F, "tok: the message holds 0x%02x", (uint8_t)*c);
        FUZZ_CHECK(memcmp(&a, &zero, sizeof zero) == 0, "tok: *req not zeroed on error");
        memset(err_small, 'z', sizeof err_small);
        rc_small = baton_serve_tok_parse((const char *)body, n, detok, &small, err_small,
                                         sizeof err_small);
        FUZZ_CHECK(rc_small == rc_a && err_small[sizeof err_small - 1] == 0 &&
                       strncmp(err_small, err_a, sizeof err_small - 1) == 0,
                   "tok: with 9 bytes for the message");
        FUZZ_CHECK(baton_serve_tok_parse((const char *)body, n, detok, &small, NULL, 0) == rc_a,
                   "tok: with no message buffer");
        return;
    }
    json_t *root = json_loadb((const char *)body, n, JSON_REJECT_DUPLICATES, NULL);

    FUZZ_CHECK(root != NULL && json_is_object(root), "tok: accepted, but not a JSON object");
    FUZZ_CHECK(a.detokenize == detok, "tok: detokenize %d, asked %d", a.detokenize, detok);
    if (detok) {
        json_t *t = json_object_get(root, "tokens");

        FUZZ_CHECK(a.content == NULL && a.content_len == 0, "detok: content");
        FUZZ_CHECK(json_is_array(t) && json_array_size(t) == a.n_tokens &&
                       a.n_tokens <= BATON_SERVE_MAX_DETOKENIZE &&
                       (a.n_tokens == 0) == (a.tokens == NULL),
                   "detok: %zu ids", a.n_tokens);
        for (size_t i = 0; i < a.n_tokens; i++)
            FUZZ_CHECK(a.tokens[i] >= 0 && a.tokens[i] == b.tokens[i] &&
                           json_integer_value(json_array_get(t, i)) == a.tokens[i],
                       "detok: id %zu is not jansson's", i);
    } else {
        json_t *c = json_object_get(root, "content");

        check_text(a.content, a.content_len, "content");
        FUZZ_CHECK(a.content_len <= BATON_TOKENIZER_MAX_TEXT_BYTES, "tok: %zu bytes",
                   a.content_len);
        FUZZ_CHECK(json_is_string(c) && json_string_length(c) == a.content_len &&
                       memcmp(json_string_value(c), a.content, a.content_len) == 0 &&
                       strcmp(a.content, b.content) == 0,
                   "tok: content is not jansson's");
        FUZZ_CHECK(a.add_special == jansson_flag(root, "add_special", 0) &&
                       a.parse_special == jansson_flag(root, "parse_special", 1) &&
                       a.with_pieces == jansson_flag(root, "with_pieces", 0) &&
                       a.add_special == b.add_special && a.parse_special == b.parse_special &&
                       a.with_pieces == b.with_pieces,
                   "tok: a flag is not jansson's");
        FUZZ_CHECK(a.tokens == NULL && a.n_tokens == 0, "tok: ids");
    }
    json_decref(root);
    baton_serve_tok_free(&a);
    baton_serve_tok_free(&b);
}

/* clean(p[0, n)) into a fresh block, checked for what every output holds. */
static char *clean_checked(const uint8_t *p, size_t n, size_t *len)
{
    char *t = baton_serve_utf8_clean((const char *)p, n, len);

    FUZZ_CHECK(t != NULL, "clean: NULL");
    FUZZ_CHECK(t[*len] == 0 && strlen(t) == *len, "clean: a NUL inside or none after");
    FUZZ_CHECK(*len <= 3 * n, "clean: %zu bytes from %zu", *len, n);
    FUZZ_CHECK(utf8_ok((const uint8_t *)t, *len, 1), "clean: output not valid UTF-8");
    return t;
}

static void check_utf8(const uint8_t *p, size_t n)
{
    size_t len, again_len, head_len, tail_len, c = baton_serve_utf8_complete((const char *)p, n);
    char *whole = clean_checked(p, n, &len), *again, *head, *tail, *streamed;
    size_t pending = 0, delivered = 0, out_at = 0, pieces = 0;

    if (utf8_ok(p, n, 1))
        FUZZ_CHECK(len == n && memcmp(whole, p, n) == 0, "clean changed valid UTF-8");
    again = clean_checked((const uint8_t *)whole, len, &again_len);
    FUZZ_CHECK(again_len == len && memcmp(again, whole, len) == 0, "clean twice differs");
    FUZZ_CHECK(baton_serve_utf8_complete(whole, len) == len, "clean output not complete");

    FUZZ_CHECK(c <= n && n - c <= 3, "complete %zu of %zu", c, n);
    head = clean_checked(p, c, &head_len);
    tail = clean_checked(p + c, n - c, &tail_len);
    FUZZ_CHECK(head_len + tail_len == len && memcmp(whole, head, head_len) == 0 &&
                   memcmp(whole + head_len, tail, tail_len) == 0,
               "clean of the complete part and the rest is not clean of the whole");
    if (c < n)
        FUZZ_CHECK(tail_len == 3 && memcmp(tail, "\xEF\xBF\xBD", 3) == 0,
                   "the incomplete rest is not one U+FFFD");

    /* a stream: bytes arrive in pieces; send the complete part of what is
     * pending, keep the rest; clean what is left at the end */
    streamed = malloc(len + 1);
    FUZZ_CHECK(streamed != NULL, "out of memory");
    while (delivered < n) {
        size_t piece = 1u + (p[pieces++ % n] & 7u), k, sent_len;
        char *sent;

        delivered += piece < n - delivered ? piece : n - delivered;
        k = baton_serve_utf8_complete((const char *)p + pending, delivered - pending);
        FUZZ_CHECK(k <= delivered - pending, "complete past its input");
        sent = clean_checked(p + pending, k, &sent_len);
        FUZZ_CHECK(sent_len <= len - out_at && memcmp(whole + out_at, sent, sent_len) == 0,
                   "streamed text differs at %zu", out_at);
        memcpy(streamed + out_at, sent, sent_len);
        out_at += sent_len;
        pending += k;
        free(sent);
    }
    {
        size_t rest_len;
        char *rest = clean_checked(p + pending, n - pending, &rest_len);

        FUZZ_CHECK(out_at + rest_len == len && memcmp(whole + out_at, rest, rest_len) == 0,
                   "streamed text differs at the end");
        free(rest);
    }
    free(streamed);
    free(head);
    free(tail);
    free(again);
    free(whole);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const int chat = size > 0 ? data[0] & 1 : 0;
    const size_t n = size > 0 ? size - 1 : 0;
    uint8_t *body = fuzz_dup(size > 0 ? data + 1 : data, n);
    struct baton_serve_req a, b, small;
    char err_a[256], err_b[256], err_small[9];
    int rc_a, rc_b, rc_small;

    if (size > 0 && (data[0] & 2)) {
        check_tok(body, n, data[0] & 1);
        check_utf8(body, n);
        free(body);
        return 0;
    }
    memset(err_a, 'x', sizeof err_a);
    memset(err_b, 'y', sizeof err_b);
    rc_a = baton_serve_req_parse((const char *)body, n, chat, &a, err_a, sizeof err_a);
    rc_b = baton_serve_req_parse((const char *)body, n, chat, &b, err_b, sizeof err_b);
    FUZZ_CHECK(rc_a == rc_b, "status %d, then %d", rc_a, rc_b);
    if (rc_a == 0) {
        check_success(body, n, chat, &a);
        FUZZ_CHECK(same_req(&a, &b), "parsed twice, two results");
    } else {
        FUZZ_CHECK(memchr(err_a, 0, sizeof err_a) != NULL, "message not terminated");
        FUZZ_CHECK(strcmp(err_a, err_b) == 0, "two messages: %s / %s", err_a, err_b);
        check_error(rc_a, err_a, &a);
        check_error(rc_b, err_b, &b);

        memset(err_small, 'z', sizeof err_small);
        rc_small = baton_serve_req_parse((const char *)body, n, chat, &small, err_small,
                                         sizeof err_small);
        FUZZ_CHECK(rc_small == rc_a && err_small[sizeof err_small - 1] == 0 &&
                       strncmp(err_small, err_a, sizeof err_small - 1) == 0,
                   "with 9 bytes for the message: %d", rc_small);
        err_small[0] = 'z';
        rc_small = baton_serve_req_parse((const char *)body, n, chat, &small, err_small, 1);
        FUZZ_CHECK(rc_small == rc_a && err_small[0] == 0, "with 1 byte for the message");
        rc_small = baton_serve_req_parse((const char *)body, n, chat, &small, NULL, 0);
        FUZZ_CHECK(rc_small == rc_a, "with no message buffer");
    }
    baton_serve_req_free(&a);
    baton_serve_req_free(&b);

    check_utf8(body, n);
    free(body);
    return 0;
}
