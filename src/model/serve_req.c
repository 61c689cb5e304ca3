/* The body of a `baton serve` request (serve_req.h): jansson parses the
 * JSON, this file applies the field rules; and the UTF-8 rules of a reply's
 * text (Unicode 15, chapter 3.9, Table 3-7 and "U+FFFD Substitution of
 * Maximal Subparts"). */
#include "model/serve_req.h"

#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "baton/status.h"
#include "model/tokenizer.h"

/* Stores one sentence in err (when errcap > 0) and returns rc. */
__attribute__((format(printf, 4, 5))) static int fail(char *err, size_t errcap, int rc,
                                                      const char *fmt, ...)
{
    va_list ap;

    if (errcap > 0) {
        va_start(ap, fmt);
        vsnprintf(err, errcap, fmt, ap);
        va_end(ap);
    }
    return rc;
}

/* The member key of o, NULL when absent or JSON null (null is as if absent,
 * as OpenAI's API treats it). */
static json_t *field(json_t *o, const char *key)
{
    json_t *v = json_object_get(o, key);

    return v == NULL || json_is_null(v) ? NULL : v;
}

/* An integer member in [lo, hi] into *out; *given 1 when present. */
static int get_int(json_t *o, const char *key, json_int_t lo, json_int_t hi, json_int_t *out,
                   int *given, const char *range, char *err, size_t errcap)
{
    json_t *v = field(o, key);

    *given = v != NULL;
    if (v == NULL)
        return 0;
    if (!json_is_integer(v) || json_integer_value(v) < lo || json_integer_value(v) > hi)
        return fail(err, errcap, BATON_E_FORMAT, "\"%s\" must be an integer from %s", key, range);
    *out = json_integer_value(v);
    return 0;
}

/* A number member (integer or real) into *out; *given 1 when present. The
 * range is checked by the caller. */
static int get_number(json_t *o, const char *key, double *out, int *given)
{
    json_t *v = field(o, key);

    *given = v != NULL;
    if (v == NULL)
        return 0;
    if (!json_is_number(v))
        return -1;
    *out = json_number_value(v);
    /* jansson refuses reals that overflow, and JSON has no NaN: kept in
     * case a later jansson accepts them */
    return isfinite(*out) ? 0 : -1;
}

/* max_tokens, and the two other names it goes by: at most one given. */
static int parse_max_tokens(json_t *root, struct baton_serve_req *req, char *err, size_t errcap)
{
    static const char *const names[] = {"max_tokens", "max_completion_tokens", "n_predict"};
    const char *first = NULL;
    int rc = 0;

    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        json_int_t v = 0;
        int given = 0;

        rc = get_int(root, names[i], 1, INT32_MAX, &v, &given, "1 to 2147483647", err, errcap);
        if (rc != 0)
            goto out;
        if (!given)
            continue;
        if (first != NULL) {
            rc = fail(err, errcap, BATON_E_FORMAT, "\"%s\" and \"%s\" must not both be given",
                      first, names[i]);
            goto out;
        }
        first = names[i];
        req->max_tokens = (uint32_t)v;
        req->has_max_tokens = 1;
    }
out:
    return rc;
}

/* The sampling fields: temperature, top_p, top_k, seed, stream. */
static int parse_sampling(json_t *root, struct baton_serve_req *req, char *err, size_t errcap)
{
    double d = 0;
    json_int_t v = 0;
    json_t *stream;
    int rc = 0;

    if (get_number(root, "temperature", &d, &req->has_temperature) != 0 ||
        (req->has_temperature && (d < 0 || d > 100))) {
        rc = fail(err, errcap, BATON_E_FORMAT, "\"temperature\" must be a number from 0 to 100");
        goto out;
    }
    if (req->has_temperature)
        req->temperature = (float)d;
    if (get_number(root, "top_p", &d, &req->has_top_p) != 0 ||
        (req->has_top_p && (!(d > 0) || d > 1))) {
        rc = fail(err, errcap, BATON_E_FORMAT,
                  "\"top_p\" must be a number greater than 0 and at most 1");
        goto out;
    }
    /* a positive double below the smallest float would become 0, outside
     * the range; the smallest float means the same (keep the top token) */
    if (req->has_top_p)
        req->top_p = (float)d > 0 ? (float)d : 0x1p-149f;
    rc = get_int(root, "top_k", 0, INT32_MAX, &v, &req->has_top_k, "0 to 2147483647", err, errcap);
    if (rc != 0)
        goto out;
    req->top_k = (uint32_t)v;
    v = 0;
    rc = get_int(root, "seed", 0, INT64_MAX, &v, &req->has_seed, "0 to 9223372036854775807", err,
                 errcap);
    if (rc != 0)
        goto out;
    req->seed = (uint64_t)v;
    stream = field(root, "stream");
    if (stream != NULL && !json_is_boolean(stream)) {
        rc = fail(err, errcap, BATON_E_FORMAT, "\"stream\" must be true or false");
        goto out;
    }
    req->stream = stream != NULL && json_is_true(stream);
out:
    return rc;
}

/* The stop strings: one string, or an array of up to BATON_SERVE_MAX_STOP
 * (OpenAI's API; llama.cpp's server takes both forms). Each is copied with
 * a NUL after it; jansson has checked that it is valid UTF-8 without NUL. */
static int parse_stop(json_t *root, struct baton_serve_req *req, char *err, size_t errcap)
{
    json_t *v = field(root, "stop");
    const int one = v != NULL && json_is_string(v);
    const size_t n = one ? 1 : v != NULL && json_is_array(v) ? json_array_size(v) : 0;
    int rc = 0;

    if (v != NULL && !one && !json_is_array(v)) {
        rc = fail(err, errcap, BATON_E_FORMAT,
                  "\"stop\" must be a string or an array of up to %u strings",
                  BATON_SERVE_MAX_STOP);
        goto out;
    }
    if (n > BATON_SERVE_MAX_STOP) {
        rc = fail(err, errcap, BATON_E_LIMIT, "\"stop\" holds more than %u strings",
                  BATON_SERVE_MAX_STOP);
        goto out;
    }
    for (size_t i = 0; i < n; i++) {
        json_t *s = one ? v : json_array_get(v, i);
        char what[16];
        size_t len;

        if (one)
            snprintf(what, sizeof what, "\"stop\"");
        else
            snprintf(what, sizeof what, "stop[%zu]", i);
        if (!json_is_string(s)) {
            rc = fail(err, errcap, BATON_E_FORMAT, "%s must be a string", what);
            goto out;
        }
        len = json_string_length(s);
        if (len == 0)
            continue; /* matches nothing: ignored, as llama-server ignores it */
        if (len > BATON_SERVE_MAX_STOP_BYTES) {
            rc = fail(err, errcap, BATON_E_LIMIT, "%s must be a string of at most %u bytes",
                      what, BATON_SERVE_MAX_STOP_BYTES);
            goto out;
        }
        req->stop[req->n_stop] = malloc(len + 1);
        if (req->stop[req->n_stop] == NULL) {
            rc = fail(err, errcap, BATON_E_NOMEM, "out of memory for %s", what);
            goto out;
        }
        memcpy(req->stop[req->n_stop], json_string_value(s), len + 1);
        req->stop_len[req->n_stop++] = len;
    }
out:
    return rc;
}

/* The fields this server accepts only at their defaults: n, logprobs,
 * echo. A value of the wrong type is a format error; a well-formed one
 * asking for the feature is unsupported. */
static int parse_unsupported(json_t *root, char *err, size_t errcap)
{
    json_t *v;
    int rc = 0;

    v = field(root, "n");
    if (v != NULL && (!json_is_integer(v) || json_integer_value(v) < 1)) {
        rc = fail(err, errcap, BATON_E_FORMAT, "\"n\" must be a positive integer");
        goto out;
    }
    if (v != NULL && json_integer_value(v) != 1) {
        rc = fail(err, errcap, BATON_E_UNSUPPORTED, "\"n\" other than 1 is not supported");
        goto out;
    }
    /* completions take a count of log-probabilities, chat a boolean */
    v = field(root, "logprobs");
    if (v != NULL && !json_is_boolean(v) && !(json_is_integer(v) && json_integer_value(v) >= 0)) {
        rc = fail(err, errcap, BATON_E_FORMAT,
                  "\"logprobs\" must be a boolean or a non-negative integer");
        goto out;
    }
    if (v != NULL && (json_is_true(v) || (json_is_integer(v) && json_integer_value(v) > 0))) {
        rc = fail(err, errcap, BATON_E_UNSUPPORTED, "\"logprobs\" is not supported");
        goto out;
    }
    v = field(root, "echo");
    if (v != NULL && !json_is_boolean(v)) {
        rc = fail(err, errcap, BATON_E_FORMAT, "\"echo\" must be true or false");
        goto out;
    }
    if (v != NULL && json_is_true(v))
        rc = fail(err, errcap, BATON_E_UNSUPPORTED, "\"echo\" is not supported");
out:
    return rc;
}

/* A copy of s[0, len) with a NUL after it, into *dst; *total grows by len,
 * refused past the text limit. jansson refuses "\u0000" (no
 * JSON_ALLOW_NUL), so a NUL inside is not expected: checked all the same,
 * since a text must be a C string. */
static int take_text(const char *s, size_t len, char **dst, size_t *total, const char *what,
                     char *err, size_t errcap)
{
    int rc = 0;

    *dst = NULL;
    if (memchr(s, 0, len) != NULL) {
        rc = fail(err, errcap, BATON_E_FORMAT, "%s must not hold a NUL character", what);
        goto out;
    }
    if (len > BATON_TOKENIZER_MAX_TEXT_BYTES - *total) {
        rc = fail(err, errcap, BATON_E_LIMIT, "the text is over %u bytes",
                  (unsigned)BATON_TOKENIZER_MAX_TEXT_BYTES);
        goto out;
    }
    *dst = malloc(len + 1);
    if (*dst == NULL) {
        rc = fail(err, errcap, BATON_E_NOMEM, "out of memory for %s", what);
        goto out;
    }
    memcpy(*dst, s, len);
    (*dst)[len] = 0;
    *total += len;
out:
    return rc;
}

/* A completion's prompt: a string, or an array of exactly one string. */
static int parse_prompt(json_t *root, struct baton_serve_req *req, char *err, size_t errcap)
{
    json_t *v = field(root, "prompt");
    size_t total = 0;
    int rc = 0;

    if (v != NULL && json_is_array(v) && json_array_size(v) == 1)
        v = json_array_get(v, 0);
    if (v == NULL || !json_is_string(v)) {
        rc = fail(err, errcap, BATON_E_FORMAT,
                  v == NULL ? "\"prompt\" is missing (a string, or an array of one string)"
                            : "\"prompt\" must be a string or an array of one string");
        goto out;
    }
    rc = take_text(json_string_value(v), json_string_length(v), &req->prompt, &total, "\"prompt\"",
                   err, errcap);
    if (rc != 0)
        goto out;
    req->prompt_len = total;
out:
    return rc;
}

/* messages[i]'s role, and whether it may stand at i after prev (the role
 * of messages[i - 1]; ignored for i 0). */
static int parse_role(json_t *m, size_t i, size_t n, enum baton_serve_role prev,
                      enum baton_serve_role *role, char *err, size_t errcap)
{
    static const char *const names[] = {"system", "user", "assistant"};
    json_t *v = field(m, "role");
    const char *s = v != NULL && json_is_string(v) ? json_string_value(v) : NULL;
    size_t k = 0;
    int rc = 0;

    while (s != NULL && k < 3 && strcmp(s, names[k]) != 0)
        k++;
    if (s == NULL || k == 3) {
        /* roles of OpenAI's API that need tools or are not offered here */
        const int known = s != NULL && (strcmp(s, "developer") == 0 || strcmp(s, "tool") == 0 ||
                                        strcmp(s, "function") == 0);

        rc = fail(err, errcap, known ? BATON_E_UNSUPPORTED : BATON_E_FORMAT,
                  "messages[%zu].role must be \"system\", \"user\" or \"assistant\"", i);
        goto out;
    }
    *role = (enum baton_serve_role)k;
    if (*role == BATON_SERVE_SYSTEM && i > 0) {
        rc = fail(err, errcap, BATON_E_FORMAT,
                  "messages[%zu]: a \"system\" message can only be the first", i);
    } else if (*role == BATON_SERVE_ASSISTANT && (i == 0 || prev == BATON_SERVE_SYSTEM)) {
        rc =
            fail(err, errcap, BATON_E_FORMAT,
                 "messages[%zu]: the first message (after a system message) must be the user's", i);
    } else if (i > 0 && *role == prev) {
        rc = fail(err, errcap, BATON_E_FORMAT,
                  "messages[%zu]: a \"%s\" message cannot follow a \"%s\" message", i, names[k],
                  names[k]);
    } else if (i + 1 == n && *role != BATON_SERVE_USER) {
        rc = fail(err, errcap, BATON_E_FORMAT, "the last message must be the user's");
    }
out:
    return rc;
}

/* messages[i].content: a string, or text parts joined without separator. */
static int parse_content(json_t *m, size_t i, struct baton_serve_msg *msg, size_t *total, char *err,
                         size_t errcap)
{
    json_t *c = field(m, "content");
    char what[64];
    size_t len = 0, at = 0;
    int rc = 0;

    snprintf(what, sizeof what, "messages[%zu].content", i);
    if (c != NULL && json_is_string(c)) {
        rc = take_text(json_string_value(c), json_string_length(c), &msg->text, total, what, err,
                       errcap);
        msg->len = msg->text != NULL ? json_string_length(c) : 0;
        goto out;
    }
    if (c == NULL || !json_is_array(c)) {
        rc = fail(err, errcap, BATON_E_FORMAT, "%s must be a string or an array of text parts",
                  what);
        goto out;
    }
    /* first the parts' rules and their length, then one block */
    for (size_t j = 0; j < json_array_size(c); j++) {
        json_t *part = json_array_get(c, j), *type, *text;

        if (!json_is_object(part)) {
            rc = fail(err, errcap, BATON_E_FORMAT, "%s[%zu] must be an object", what, j);
            goto out;
        }
        type = field(part, "type");
        if (type == NULL || !json_is_string(type)) {
            rc = fail(err, errcap, BATON_E_FORMAT, "%s[%zu].type must be a string", what, j);
            goto out;
        }
        if (strcmp(json_string_value(type), "text") != 0) {
            rc = fail(err, errcap, BATON_E_UNSUPPORTED,
                      "%s[%zu] is not a \"text\" part: only text is supported", what, j);
            goto out;
        }
        text = field(part, "text");
        if (text == NULL || !json_is_string(text)) {
            rc = fail(err, errcap, BATON_E_FORMAT, "%s[%zu].text must be a string", what, j);
            goto out;
        }
        if (memchr(json_string_value(text), 0, json_string_length(text)) != NULL) {
            rc = fail(err, errcap, BATON_E_FORMAT, "%s[%zu].text must not hold a NUL character",
                      what, j);
            goto out;
        }
        if (json_string_length(text) > BATON_TOKENIZER_MAX_TEXT_BYTES - *total - len) {
            rc = fail(err, errcap, BATON_E_LIMIT, "the text is over %u bytes",
                      (unsigned)BATON_TOKENIZER_MAX_TEXT_BYTES);
            goto out;
        }
        len += json_string_length(text);
    }
    msg->text = malloc(len + 1);
    if (msg->text == NULL) {
        rc = fail(err, errcap, BATON_E_NOMEM, "out of memory for %s", what);
        goto out;
    }
    for (size_t j = 0; j < json_array_size(c); j++) {
        json_t *text = json_object_get(json_array_get(c, j), "text");

        memcpy(msg->text + at, json_string_value(text), json_string_length(text));
        at += json_string_length(text);
    }
    msg->text[len] = 0;
    msg->len = len;
    *total += len;
out:
    return rc;
}

static int parse_messages(json_t *root, struct baton_serve_req *req, char *err, size_t errcap)
{
    json_t *v = field(root, "messages");
    enum baton_serve_role prev = BATON_SERVE_SYSTEM;
    size_t n, total = 0;
    int rc = 0;

    if (v == NULL || !json_is_array(v) || json_array_size(v) == 0) {
        rc = fail(err, errcap, BATON_E_FORMAT, "\"messages\" must be an array of 1 to %u messages",
                  BATON_SERVE_MAX_MESSAGES);
        goto out;
    }
    n = json_array_size(v);
    if (n > BATON_SERVE_MAX_MESSAGES) {
        rc = fail(err, errcap, BATON_E_LIMIT, "\"messages\" holds more than %u messages",
                  BATON_SERVE_MAX_MESSAGES);
        goto out;
    }
    req->msgs = calloc(n, sizeof req->msgs[0]);
    if (req->msgs == NULL) {
        rc = fail(err, errcap, BATON_E_NOMEM, "out of memory for \"messages\"");
        goto out;
    }
    for (size_t i = 0; i < n; i++) {
        json_t *m = json_array_get(v, i);

        if (!json_is_object(m)) {
            rc = fail(err, errcap, BATON_E_FORMAT, "messages[%zu] must be an object", i);
            goto out;
        }
        rc = parse_role(m, i, n, prev, &req->msgs[i].role, err, errcap);
        if (rc != 0)
            goto out;
        prev = req->msgs[i].role;
        /* counted before the text so that free() sees every block taken */
        req->n_msgs = i + 1;
        rc = parse_content(m, i, &req->msgs[i], &total, err, errcap);
        if (rc != 0)
            goto out;
    }
out:
    return rc;
}

/* The body as a JSON object into *root (NULL on error; the caller frees
 * it). Returns 0 or a status with its sentence in err. */
static int load_body(const char *body, size_t len, json_t **root, char *err, size_t errcap)
{
    json_error_t jerr;
    int rc = 0;

    *root = NULL;
    if (errcap > 0)
        err[0] = 0;
    if (len > BATON_SERVE_MAX_BODY)
        return fail(err, errcap, BATON_E_LIMIT, "the request body is over %u bytes",
                    BATON_SERVE_MAX_BODY);
    *root = json_loadb(body, len, JSON_REJECT_DUPLICATES, &jerr);
    if (*root == NULL) {
        /* jansson's text may quote the body: only its position is given */
        if (json_error_code(&jerr) == json_error_out_of_memory)
            rc = fail(err, errcap, BATON_E_NOMEM, "out of memory parsing the body");
        else if (json_error_code(&jerr) == json_error_duplicate_key)
            rc = fail(err, errcap, BATON_E_FORMAT, "the body repeats a key (line %d, column %d)",
                      jerr.line, jerr.column);
        else if (strstr(jerr.text, "\\u0000") != NULL) /* jansson's own words: no body */
            rc = fail(err, errcap, BATON_E_FORMAT,
                      "a string holds \\u0000 (NUL), which a text may not (line %d, column %d)",
                      jerr.line, jerr.column);
        else if (json_error_code(&jerr) == json_error_numeric_overflow)
            rc = fail(err, errcap, BATON_E_FORMAT,
                      "a number is out of range (line %d, column %d)", jerr.line, jerr.column);
        else
            rc = fail(err, errcap, BATON_E_FORMAT,
                      "the body is not valid JSON (line %d, column %d)", jerr.line, jerr.column);
        return rc;
    }
    if (!json_is_object(*root)) {
        json_decref(*root);
        *root = NULL;
        return fail(err, errcap, BATON_E_FORMAT, "the body must be a JSON object");
    }
    return 0;
}

int baton_serve_req_parse(const char *body, size_t len, int chat, struct baton_serve_req *req,
                          char *err, size_t errcap)
{
    json_t *root = NULL;
    int rc;

    memset(req, 0, sizeof *req);
    rc = load_body(body, len, &root, err, errcap);
    if (rc != 0)
        goto out;
    req->chat = chat != 0;
    rc = chat ? parse_messages(root, req, err, errcap) : parse_prompt(root, req, err, errcap);
    if (rc == 0)
        rc = parse_max_tokens(root, req, err, errcap);
    if (rc == 0)
        rc = parse_sampling(root, req, err, errcap);
    if (rc == 0)
        rc = parse_stop(root, req, err, errcap);
    if (rc == 0)
        rc = parse_unsupported(root, err, errcap);
out:
    json_decref(root);
    if (rc != 0)
        baton_serve_req_free(req);
    return rc;
}

void baton_serve_req_free(struct baton_serve_req *req)
{
    free(req->prompt);
    for (size_t i = 0; i < req->n_msgs; i++)
        free(req->msgs[i].text);
    free(req->msgs);
    for (size_t i = 0; i < req->n_stop; i++)
        free(req->stop[i]);
    memset(req, 0, sizeof *req);
}

/* A boolean member into *out (def when absent). */
static int get_bool(json_t *o, const char *key, int def, int *out, char *err, size_t errcap)
{
    json_t *v = field(o, key);

    *out = def;
    if (v == NULL)
        return 0;
    if (!json_is_boolean(v))
        return fail(err, errcap, BATON_E_FORMAT, "\"%s\" must be true or false", key);
    *out = json_is_true(v);
    return 0;
}

/* /tokenize's fields. */
static int parse_tokenize(json_t *root, struct baton_serve_tok_req *req, char *err,
                          size_t errcap)
{
    json_t *v = field(root, "content");
    size_t total = 0;
    int rc;

    if (v == NULL || !json_is_string(v))
        return fail(err, errcap, BATON_E_FORMAT,
                    v == NULL ? "\"content\" is missing (the text to tokenize, a string)"
                              : "\"content\" must be a string");
    rc = take_text(json_string_value(v), json_string_length(v), &req->content, &total,
                   "\"content\"", err, errcap);
    if (rc != 0)
        return rc;
    req->content_len = total;
    rc = get_bool(root, "add_special", 0, &req->add_special, err, errcap);
    if (rc == 0)
        rc = get_bool(root, "parse_special", 1, &req->parse_special, err, errcap);
    if (rc == 0)
        rc = get_bool(root, "with_pieces", 0, &req->with_pieces, err, errcap);
    return rc;
}

/* /detokenize's ids. */
static int parse_detokenize(json_t *root, struct baton_serve_tok_req *req, char *err,
                            size_t errcap)
{
    json_t *v = field(root, "tokens");
    size_t n;

    if (v == NULL || !json_is_array(v))
        return fail(err, errcap, BATON_E_FORMAT,
                    v == NULL ? "\"tokens\" is missing (an array of token ids)"
                              : "\"tokens\" must be an array of token ids");
    n = json_array_size(v);
    if (n > BATON_SERVE_MAX_DETOKENIZE)
        return fail(err, errcap, BATON_E_LIMIT, "\"tokens\" holds more than %u ids",
                    BATON_SERVE_MAX_DETOKENIZE);
    if (n == 0)
        return 0;
    req->tokens = malloc(n * sizeof *req->tokens);
    if (req->tokens == NULL)
        return fail(err, errcap, BATON_E_NOMEM, "out of memory for %zu ids", n);
    for (size_t i = 0; i < n; i++) {
        json_t *t = json_array_get(v, i);

        if (!json_is_integer(t) || json_integer_value(t) < 0 ||
            json_integer_value(t) > INT32_MAX)
            return fail(err, errcap, BATON_E_FORMAT,
                        "\"tokens\"[%zu] must be an integer from 0 to 2147483647", i);
        req->tokens[i] = (int32_t)json_integer_value(t);
    }
    req->n_tokens = n;
    return 0;
}

int baton_serve_tok_parse(const char *body, size_t len, int detokenize,
                          struct baton_serve_tok_req *req, char *err, size_t errcap)
{
    json_t *root = NULL;
    int rc;

    memset(req, 0, sizeof *req);
    rc = load_body(body, len, &root, err, errcap);
    if (rc == 0) {
        req->detokenize = detokenize != 0;
        rc = detokenize ? parse_detokenize(root, req, err, errcap)
                        : parse_tokenize(root, req, err, errcap);
    }
    json_decref(root);
    if (rc != 0)
        baton_serve_tok_free(req);
    return rc;
}

void baton_serve_tok_free(struct baton_serve_tok_req *req)
{
    free(req->content);
    free(req->tokens);
    memset(req, 0, sizeof *req);
}

/* The maximal subpart of p[0, n) at i (n > i): its length, *valid 1 when it
 * is a whole well-formed sequence, *cut 1 when it is a proper prefix of one
 * that p ends inside. Table 3-7's rows: the lead byte gives the length and
 * the range of the second byte; later bytes are 80..BF. */
static size_t utf8_subpart(const unsigned char *p, size_t n, size_t i, int *valid, int *cut)
{
    const unsigned char b = p[i];
    unsigned char lo = 0x80, hi = 0xBF;
    size_t want = 0, k = 1;

    *valid = 0;
    *cut = 0;
    if (b < 0x80) {
        *valid = b != 0;
        return 1;
    }
    if (b >= 0xC2 && b <= 0xDF)
        want = 2;
    else if (b >= 0xE0 && b <= 0xEF)
        want = 3;
    else if (b >= 0xF0 && b <= 0xF4)
        want = 4;
    else
        return 1; /* a continuation byte, C0, C1 or F5..FF: never valid */
    if (b == 0xE0)
        lo = 0xA0; /* below: overlong */
    else if (b == 0xED)
        hi = 0x9F; /* above: surrogates */
    else if (b == 0xF0)
        lo = 0x90; /* below: overlong */
    else if (b == 0xF4)
        hi = 0x8F; /* above: past U+10FFFF */
    while (k < want && i + k < n && p[i + k] >= lo && p[i + k] <= hi) {
        k++;
        lo = 0x80;
        hi = 0xBF;
    }
    *valid = k == want;
    *cut = k < want && i + k == n;
    return k;
}

size_t baton_serve_utf8_complete(const char *p, size_t n)
{
    const unsigned char *u = (const unsigned char *)p;

    /* A lead byte always starts a subpart, and a sequence is at most 4
     * bytes: only a lead among the last 3 bytes can begin a cut one. */
    for (size_t k = 1; k <= 3 && k <= n; k++) {
        const unsigned char b = u[n - k];
        int valid, cut;

        if (b >= 0x80 && b <= 0xBF)
            continue;
        utf8_subpart(u, n, n - k, &valid, &cut);
        return cut ? n - k : n;
    }
    return n;
}

char *baton_serve_utf8_clean(const char *p, size_t n, size_t *out_len)
{
    const unsigned char *u = (const unsigned char *)p;
    size_t need = 0, at = 0;
    char *text = NULL;

    /* first the size (a subpart is at least 1 byte and U+FFFD 3), then the
     * bytes */
    for (size_t i = 0; i < n;) {
        int valid, cut;
        const size_t k = utf8_subpart(u, n, i, &valid, &cut);

        if (need > SIZE_MAX - 4)
            goto out;
        need += valid ? k : 3;
        i += k;
    }
    text = malloc(need + 1);
    if (text == NULL)
        goto out;
    for (size_t i = 0; i < n;) {
        int valid, cut;
        const size_t k = utf8_subpart(u, n, i, &valid, &cut);

        if (valid) {
            memcpy(text + at, p + i, k);
            at += k;
        } else {
            memcpy(text + at, "\xEF\xBF\xBD", 3);
            at += 3;
        }
        i += k;
    }
    text[at] = 0;
    *out_len = at;
out:
    return text;
}
