/* `baton serve` request bodies (model/serve_req.h): every field parsed to
 * its exact value, every refusal with its status and a message naming the
 * field, the chat messages' order rules, text parts, the text limit at its
 * edge; and the UTF-8 rules on hand-computed cases (Unicode 3.9's maximal
 * subparts, Table 3-7). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "baton/status.h"
#include "model/serve_req.h"
#include "model/tokenizer.h"

static const struct baton_serve_req zero_req;

static void parse_ok(const char *body, int chat, struct baton_serve_req *req)
{
    char err[256] = "";
    int rc = baton_serve_req_parse(body, strlen(body), chat, req, err, sizeof err);

    if (rc != 0)
        fail_msg("%s: %d %s", body, rc, err);
}

/* body refused with status want, the message naming `names` (a substring),
 * and *req left zeroed. */
static void refuse(const char *body, int chat, int want, const char *names)
{
    struct baton_serve_req req;
    char err[256] = "";
    int rc;

    memset(&req, 0xA5, sizeof req);
    rc = baton_serve_req_parse(body, strlen(body), chat, &req, err, sizeof err);
    if (rc != want || strstr(err, names) == NULL)
        fail_msg("%s: status %d (want %d), message \"%s\" (want \"%s\" in it)", body, rc, want, err,
                 names);
    assert_memory_equal(&req, &zero_req, sizeof req);
}

static void test_prompt_minimal(void **state)
{
    struct baton_serve_req req;

    (void)state;
    parse_ok("{\"prompt\": \"Once upon a time\"}", 0, &req);
    assert_int_equal(req.chat, 0);
    assert_string_equal(req.prompt, "Once upon a time");
    assert_int_equal(req.prompt_len, 16);
    assert_null(req.msgs);
    assert_int_equal(req.n_msgs, 0);
    assert_int_equal(req.has_max_tokens, 0);
    assert_int_equal(req.has_temperature, 0);
    assert_int_equal(req.has_top_p, 0);
    assert_int_equal(req.has_top_k, 0);
    assert_int_equal(req.has_seed, 0);
    assert_int_equal(req.stream, 0);
    baton_serve_req_free(&req);
    assert_memory_equal(&req, &zero_req, sizeof req);
    baton_serve_req_free(&req); /* a zeroed one is fine */
}

static void test_prompt_every_field(void **state)
{
    struct baton_serve_req req;
    const char *body = "{\"model\": \"x\", \"prompt\": [\"caf\\u00e9 \\ud83d\\ude00\"],"
                       " \"max_tokens\": 2147483647, \"temperature\": 0.5, \"top_p\": 1,"
                       " \"top_k\": 40, \"seed\": 9223372036854775807, \"stream\": true,"
                       " \"stop\": [], \"n\": 1, \"logprobs\": 0, \"echo\": false,"
                       " \"user\": {\"ignored\": [1, 2]}}";

    (void)state;
    parse_ok(body, 0, &req);
    assert_string_equal(req.prompt, "caf\xC3\xA9 \xF0\x9F\x98\x80");
    assert_int_equal(req.prompt_len, 10);
    assert_int_equal(req.has_max_tokens, 1);
    assert_int_equal(req.max_tokens, 2147483647u);
    assert_int_equal(req.has_temperature, 1);
    assert_true(req.temperature == 0.5f);
    assert_int_equal(req.has_top_p, 1);
    assert_true(req.top_p == 1.0f);
    assert_int_equal(req.has_top_k, 1);
    assert_int_equal(req.top_k, 40);
    assert_int_equal(req.has_seed, 1);
    assert_true(req.seed == UINT64_C(9223372036854775807));
    assert_int_equal(req.stream, 1);
    assert_int_equal(req.n_stop, 0); /* [] asks for none */
    baton_serve_req_free(&req);

    /* the lowest values, integers where reals are allowed, the other names */
    parse_ok("{\"prompt\": \"\", \"n_predict\": 1, \"temperature\": 0, \"top_p\": 0.25,"
             " \"top_k\": 0, \"seed\": 0, \"stream\": false, \"stop\": null,"
             " \"logprobs\": false}",
             0, &req);
    assert_string_equal(req.prompt, "");
    assert_int_equal(req.prompt_len, 0);
    assert_int_equal(req.max_tokens, 1);
    assert_true(req.temperature == 0.0f && req.has_temperature == 1);
    assert_true(req.top_p == 0.25f);
    assert_true(req.top_k == 0 && req.has_top_k == 1);
    assert_true(req.seed == 0 && req.has_seed == 1);
    assert_int_equal(req.stream, 0);
    baton_serve_req_free(&req);

    parse_ok("{\"prompt\": \"a\", \"max_completion_tokens\": 7, \"temperature\": 100}", 0, &req);
    assert_int_equal(req.max_tokens, 7);
    assert_true(req.temperature == 100.0f);
    baton_serve_req_free(&req);

    /* a top_p below the smallest float stays above 0 */
    parse_ok("{\"prompt\": \"a\", \"top_p\": 1e-300}", 0, &req);
    assert_true(req.top_p > 0.0f && req.top_p < 1e-44f);
    baton_serve_req_free(&req);
}

static void test_null_is_absent(void **state)
{
    struct baton_serve_req req;

    (void)state;
    parse_ok("{\"prompt\": \"p\", \"max_tokens\": null, \"n_predict\": 5, \"temperature\": null,"
             " \"top_p\": null, \"top_k\": null, \"seed\": null, \"stream\": null,"
             " \"stop\": null, \"n\": null, \"logprobs\": null, \"echo\": null}",
             0, &req);
    assert_int_equal(req.max_tokens, 5);
    assert_int_equal(req.has_temperature + req.has_top_p + req.has_top_k + req.has_seed, 0);
    assert_int_equal(req.stream, 0);
    assert_int_equal(req.n_stop, 0);
    baton_serve_req_free(&req);
    refuse("{\"prompt\": null}", 0, BATON_E_FORMAT, "\"prompt\"");
    refuse("{\"messages\": null}", 1, BATON_E_FORMAT, "\"messages\"");
}

static void test_field_refusals(void **state)
{
    (void)state;
    refuse("{\"prompt\": \"a\", \"max_tokens\": 0}", 0, BATON_E_FORMAT,
           "\"max_tokens\" must be an integer from 1 to 2147483647");
    refuse("{\"prompt\": \"a\", \"max_tokens\": 2147483648}", 0, BATON_E_FORMAT, "\"max_tokens\"");
    refuse("{\"prompt\": \"a\", \"max_tokens\": 5.0}", 0, BATON_E_FORMAT, "\"max_tokens\"");
    refuse("{\"prompt\": \"a\", \"max_tokens\": \"5\"}", 0, BATON_E_FORMAT, "\"max_tokens\"");
    refuse("{\"prompt\": \"a\", \"n_predict\": -1}", 0, BATON_E_FORMAT, "\"n_predict\"");
    refuse("{\"prompt\": \"a\", \"max_completion_tokens\": true}", 0, BATON_E_FORMAT,
           "\"max_completion_tokens\"");
    refuse("{\"prompt\": \"a\", \"max_tokens\": 5, \"n_predict\": 5}", 0, BATON_E_FORMAT,
           "\"max_tokens\" and \"n_predict\"");
    refuse("{\"prompt\": \"a\", \"max_tokens\": 5, \"max_completion_tokens\": 5}", 0,
           BATON_E_FORMAT, "\"max_tokens\" and \"max_completion_tokens\"");
    refuse("{\"prompt\": \"a\", \"temperature\": -0.01}", 0, BATON_E_FORMAT,
           "\"temperature\" must be a number from 0 to 100");
    refuse("{\"prompt\": \"a\", \"temperature\": 100.5}", 0, BATON_E_FORMAT, "\"temperature\"");
    refuse("{\"prompt\": \"a\", \"temperature\": \"1\"}", 0, BATON_E_FORMAT, "\"temperature\"");
    refuse("{\"prompt\": \"a\", \"top_p\": 0}", 0, BATON_E_FORMAT, "\"top_p\"");
    refuse("{\"prompt\": \"a\", \"top_p\": 1.0001}", 0, BATON_E_FORMAT, "\"top_p\"");
    refuse("{\"prompt\": \"a\", \"top_p\": -1}", 0, BATON_E_FORMAT, "\"top_p\"");
    refuse("{\"prompt\": \"a\", \"top_k\": -1}", 0, BATON_E_FORMAT, "\"top_k\"");
    refuse("{\"prompt\": \"a\", \"top_k\": 2147483648}", 0, BATON_E_FORMAT, "\"top_k\"");
    refuse("{\"prompt\": \"a\", \"top_k\": 1.5}", 0, BATON_E_FORMAT, "\"top_k\"");
    refuse("{\"prompt\": \"a\", \"seed\": -1}", 0, BATON_E_FORMAT, "\"seed\"");
    refuse("{\"prompt\": \"a\", \"seed\": 1e3}", 0, BATON_E_FORMAT, "\"seed\"");
    refuse("{\"prompt\": \"a\", \"stream\": 1}", 0, BATON_E_FORMAT, "\"stream\"");
    refuse("{\"prompt\": 5}", 0, BATON_E_FORMAT, "\"prompt\"");
    refuse("{\"prompt\": []}", 0, BATON_E_FORMAT, "\"prompt\"");
    refuse("{\"prompt\": [\"a\", \"b\"]}", 0, BATON_E_FORMAT, "\"prompt\"");
    refuse("{\"prompt\": [1, 2]}", 0, BATON_E_FORMAT, "\"prompt\"");
    refuse("{}", 0, BATON_E_FORMAT, "\"prompt\"");
    /* a chat body's prompt is another endpoint's field */
    refuse("{\"messages\": [{\"role\": \"user\", \"content\": \"hi\"}]}", 0, BATON_E_FORMAT,
           "\"prompt\"");
    refuse("{\"prompt\": \"hi\"}", 1, BATON_E_FORMAT, "\"messages\"");
}

/* stop strings: one string or an array of up to 4, each copied byte for
 * byte (escapes decoded) with its length; null and [] ask for none */
static void test_stop(void **state)
{
    struct baton_serve_req req;
    char longest[300];
    int n;

    (void)state;
    parse_ok("{\"prompt\": \"a\", \"stop\": \"\\n\"}", 0, &req);
    assert_int_equal(req.n_stop, 1);
    assert_string_equal(req.stop[0], "\n");
    assert_int_equal(req.stop_len[0], 1);
    assert_null(req.stop[1]);
    baton_serve_req_free(&req);
    assert_memory_equal(&req, &zero_req, sizeof req);

    parse_ok("{\"messages\": [{\"role\": \"user\", \"content\": \"hi\"}], \"stop\":"
             " [\"User:\", \"caf\\u00e9\", \"\\ud83d\\ude00 end\", \"x\"]}",
             1, &req);
    assert_int_equal(req.n_stop, 4);
    assert_string_equal(req.stop[0], "User:");
    assert_int_equal(req.stop_len[0], 5);
    assert_string_equal(req.stop[1], "caf\xC3\xA9");
    assert_int_equal(req.stop_len[1], 5);
    assert_string_equal(req.stop[2], "\xF0\x9F\x98\x80 end");
    assert_int_equal(req.stop_len[2], 8);
    assert_string_equal(req.stop[3], "x");
    assert_int_equal(req.stop_len[3], 1);
    baton_serve_req_free(&req);
    assert_memory_equal(&req, &zero_req, sizeof req);

    parse_ok("{\"prompt\": \"a\", \"stop\": []}", 0, &req);
    assert_int_equal(req.n_stop, 0);
    baton_serve_req_free(&req);

    /* 256 bytes is the most: 85 three-byte characters and one byte */
    n = snprintf(longest, sizeof longest, "{\"prompt\": \"a\", \"stop\": [\"x\", \"");
    for (int i = 0; i < 85; i++)
        n += snprintf(longest + n, sizeof longest - (size_t)n, "%s", "\xE2\x82\xAC");
    snprintf(longest + n, sizeof longest - (size_t)n, "%s", "z\"]}");
    parse_ok(longest, 0, &req);
    assert_int_equal(req.n_stop, 2);
    assert_int_equal(req.stop_len[1], 256);
    assert_int_equal(strlen(req.stop[1]), 256);
    assert_memory_equal(req.stop[1], "\xE2\x82\xAC\xE2\x82\xAC", 6);
    assert_int_equal(req.stop[1][255], 'z');
    baton_serve_req_free(&req);
    /* ... and one more byte is refused */
    snprintf(longest + n, sizeof longest - (size_t)n, "%s", "zz\"]}");
    refuse(longest, 0, BATON_E_LIMIT, "stop[1] must be a string of at most 256 bytes");

    /* an empty string matches nothing: ignored (as llama-server does) */
    parse_ok("{\"prompt\": \"a\", \"stop\": \"\"}", 0, &req);
    assert_int_equal(req.n_stop, 0);
    baton_serve_req_free(&req);
    parse_ok("{\"prompt\": \"a\", \"stop\": [\"\", \"x\", \"\", \"yz\"]}", 0, &req);
    assert_int_equal(req.n_stop, 2);
    assert_int_equal(req.stop_len[0], 1);
    assert_string_equal(req.stop[0], "x");
    assert_int_equal(req.stop_len[1], 2);
    assert_string_equal(req.stop[1], "yz");
    assert_null(req.stop[2]);
    baton_serve_req_free(&req);
    refuse("{\"prompt\": \"a\", \"stop\": [\"a\", \"b\", \"c\", \"d\", \"e\"]}", 0,
           BATON_E_LIMIT, "\"stop\" holds more than 4 strings");
    refuse("{\"prompt\": \"a\", \"stop\": [\"x\", 3]}", 0, BATON_E_FORMAT,
           "stop[1] must be a string");
    refuse("{\"prompt\": \"a\", \"stop\": [null]}", 0, BATON_E_FORMAT,
           "stop[0] must be a string");
    refuse("{\"prompt\": \"a\", \"stop\": [[\"x\"]]}", 0, BATON_E_FORMAT, "stop[0]");
    refuse("{\"prompt\": \"a\", \"stop\": 3}", 0, BATON_E_FORMAT,
           "\"stop\" must be a string or an array of up to 4 strings");
    refuse("{\"prompt\": \"a\", \"stop\": {\"x\": 1}}", 0, BATON_E_FORMAT, "\"stop\"");
    refuse("{\"prompt\": \"a\", \"stop\": \"a\\u0000b\"}", 0, BATON_E_FORMAT, "NUL");
    /* the stop strings are freed when a later field is refused */
    refuse("{\"prompt\": \"a\", \"stop\": [\"x\", \"y\"], \"n\": 2}", 0, BATON_E_UNSUPPORTED,
           "\"n\"");
}

static void test_unsupported(void **state)
{
    (void)state;
    refuse("{\"prompt\": \"a\", \"n\": 2}", 0, BATON_E_UNSUPPORTED, "\"n\"");
    refuse("{\"prompt\": \"a\", \"n\": 0}", 0, BATON_E_FORMAT, "\"n\"");
    refuse("{\"prompt\": \"a\", \"n\": 1.0}", 0, BATON_E_FORMAT, "\"n\"");
    refuse("{\"prompt\": \"a\", \"logprobs\": true}", 0, BATON_E_UNSUPPORTED, "\"logprobs\"");
    refuse("{\"prompt\": \"a\", \"logprobs\": 3}", 0, BATON_E_UNSUPPORTED, "\"logprobs\"");
    refuse("{\"prompt\": \"a\", \"logprobs\": \"no\"}", 0, BATON_E_FORMAT, "\"logprobs\"");
    refuse("{\"prompt\": \"a\", \"echo\": true}", 0, BATON_E_UNSUPPORTED, "\"echo\"");
    refuse("{\"prompt\": \"a\", \"echo\": 0}", 0, BATON_E_FORMAT, "\"echo\"");
}

static void test_json_refusals(void **state)
{
    struct baton_serve_req req;
    char err[256] = "";
    static const char nul_body[] = "{\"prompt\": \"a\"}\0";
    char *big;

    (void)state;
    refuse("[{\"prompt\": \"a\"}]", 0, BATON_E_FORMAT, "JSON object");
    refuse("\"a\"", 0, BATON_E_FORMAT, "JSON");
    refuse("", 0, BATON_E_FORMAT, "JSON");
    refuse("{\"prompt\": \"a\"", 0, BATON_E_FORMAT, "JSON");
    refuse("{\"prompt\": \"a\", \"prompt\": \"b\"}", 0, BATON_E_FORMAT, "repeats a key");
    refuse("{\"prompt\": \"a\\u0000b\"}", 0, BATON_E_FORMAT, "NUL");
    refuse("{\"prompt\": \"a\", \"seed\": 9223372036854775808}", 0, BATON_E_FORMAT,
           "a number is out of range");
    refuse("{\"prompt\": \"\xE2\x82\"}", 0, BATON_E_FORMAT, "JSON"); /* invalid UTF-8 */
    /* the message names a position, never the body's bytes */
    refuse("{\"prompt\": \"a\"} secret", 0, BATON_E_FORMAT, "line 1");
    memset(&req, 0, sizeof req);
    assert_int_equal(
        baton_serve_req_parse("{\"prompt\": \"a\"} secret", 22, 0, &req, err, sizeof err),
        BATON_E_FORMAT);
    assert_null(strstr(err, "secret"));
    /* a NUL byte after the object is not JSON either; errcap 0 writes nothing */
    assert_int_equal(baton_serve_req_parse(nul_body, sizeof nul_body - 1, 0, &req, NULL, 0),
                     BATON_E_FORMAT);
    /* the body's own length counts, not a terminator */
    assert_int_equal(baton_serve_req_parse("{\"prompt\": \"a\"}xx", 15, 0, &req, err, sizeof err),
                     0);
    assert_string_equal(req.prompt, "a");
    baton_serve_req_free(&req);
    /* one byte over the body limit: refused before parsing */
    big = malloc(BATON_SERVE_MAX_BODY + 1);
    assert_non_null(big);
    memset(big, ' ', BATON_SERVE_MAX_BODY + 1);
    memcpy(big, "{\"prompt\": \"a\"}", 15);
    assert_int_equal(baton_serve_req_parse(big, BATON_SERVE_MAX_BODY, 0, &req, err, sizeof err), 0);
    baton_serve_req_free(&req);
    assert_int_equal(baton_serve_req_parse(big, BATON_SERVE_MAX_BODY + 1, 0, &req, err, sizeof err),
                     BATON_E_LIMIT);
    assert_non_null(strstr(err, "body"));
    free(big);
}

static void test_chat(void **state)
{
    struct baton_serve_req req;

    (void)state;
    parse_ok("{\"messages\": [{\"role\": \"system\", \"content\": \"Be brief.\"},"
             " {\"role\": \"user\", \"content\": \"Hi\"},"
             " {\"role\": \"assistant\", \"content\": [{\"type\": \"text\", \"text\": \"He\"},"
             " {\"type\": \"text\", \"text\": \"llo\"}]},"
             " {\"role\": \"user\", \"content\": [], \"name\": \"x\"}], \"max_tokens\": 3}",
             1, &req);
    assert_int_equal(req.chat, 1);
    assert_null(req.prompt);
    assert_int_equal(req.n_msgs, 4);
    assert_int_equal(req.msgs[0].role, BATON_SERVE_SYSTEM);
    assert_string_equal(req.msgs[0].text, "Be brief.");
    assert_int_equal(req.msgs[0].len, 9);
    assert_int_equal(req.msgs[1].role, BATON_SERVE_USER);
    assert_string_equal(req.msgs[1].text, "Hi");
    assert_int_equal(req.msgs[1].len, 2);
    assert_int_equal(req.msgs[2].role, BATON_SERVE_ASSISTANT);
    assert_string_equal(req.msgs[2].text, "Hello");
    assert_int_equal(req.msgs[2].len, 5);
    assert_int_equal(req.msgs[3].role, BATON_SERVE_USER);
    assert_string_equal(req.msgs[3].text, "");
    assert_int_equal(req.msgs[3].len, 0);
    assert_int_equal(req.max_tokens, 3);
    baton_serve_req_free(&req);

    parse_ok("{\"messages\": [{\"role\": \"user\", \"content\": \"only\"}]}", 1, &req);
    assert_int_equal(req.n_msgs, 1);
    assert_string_equal(req.msgs[0].text, "only");
    baton_serve_req_free(&req);
}

static void test_chat_order(void **state)
{
    (void)state;
    refuse("{\"messages\": [{\"role\": \"user\", \"content\": \"a\"},"
           " {\"role\": \"assistant\", \"content\": \"b\"},"
           " {\"role\": \"user\", \"content\": \"c\"}, {\"role\": \"user\", \"content\": \"d\"}]}",
           1, BATON_E_FORMAT, "messages[3]: a \"user\" message cannot follow a \"user\" message");
    refuse("{\"messages\": [{\"role\": \"user\", \"content\": \"a\"},"
           " {\"role\": \"assistant\", \"content\": \"b\"},"
           " {\"role\": \"assistant\", \"content\": \"c\"}]}",
           1, BATON_E_FORMAT, "messages[2]: a \"assistant\" message cannot follow");
    refuse("{\"messages\": [{\"role\": \"user\", \"content\": \"a\"},"
           " {\"role\": \"assistant\", \"content\": \"b\"}]}",
           1, BATON_E_FORMAT, "the last message must be the user's");
    refuse("{\"messages\": [{\"role\": \"system\", \"content\": \"s\"}]}", 1, BATON_E_FORMAT,
           "the last message must be the user's");
    refuse("{\"messages\": [{\"role\": \"assistant\", \"content\": \"a\"},"
           " {\"role\": \"user\", \"content\": \"b\"}]}",
           1, BATON_E_FORMAT, "messages[0]");
    refuse("{\"messages\": [{\"role\": \"system\", \"content\": \"s\"},"
           " {\"role\": \"assistant\", \"content\": \"a\"},"
           " {\"role\": \"user\", \"content\": \"b\"}]}",
           1, BATON_E_FORMAT, "messages[1]");
    refuse("{\"messages\": [{\"role\": \"user\", \"content\": \"a\"},"
           " {\"role\": \"system\", \"content\": \"s\"},"
           " {\"role\": \"user\", \"content\": \"b\"}]}",
           1, BATON_E_FORMAT, "messages[1]: a \"system\" message can only be the first");
    refuse("{\"messages\": [{\"role\": \"system\", \"content\": \"s\"},"
           " {\"role\": \"system\", \"content\": \"t\"},"
           " {\"role\": \"user\", \"content\": \"b\"}]}",
           1, BATON_E_FORMAT, "messages[1]: a \"system\" message can only be the first");
}

static void test_chat_refusals(void **state)
{
    char *body;
    size_t at = 0;
    const size_t cap = 64 + 40 * (size_t)(BATON_SERVE_MAX_MESSAGES + 1);

    (void)state;
    refuse("{\"messages\": []}", 1, BATON_E_FORMAT, "\"messages\"");
    refuse("{\"messages\": {\"role\": \"user\"}}", 1, BATON_E_FORMAT, "\"messages\"");
    refuse("{\"messages\": [\"hi\"]}", 1, BATON_E_FORMAT, "messages[0] must be an object");
    refuse("{\"messages\": [{\"content\": \"hi\"}]}", 1, BATON_E_FORMAT, "messages[0].role");
    refuse("{\"messages\": [{\"role\": \"robot\", \"content\": \"hi\"}]}", 1, BATON_E_FORMAT,
           "messages[0].role");
    refuse("{\"messages\": [{\"role\": \"tool\", \"content\": \"hi\"}]}", 1, BATON_E_UNSUPPORTED,
           "messages[0].role");
    refuse("{\"messages\": [{\"role\": \"user\"}]}", 1, BATON_E_FORMAT, "messages[0].content");
    refuse("{\"messages\": [{\"role\": \"user\", \"content\": null}]}", 1, BATON_E_FORMAT,
           "messages[0].content");
    refuse("{\"messages\": [{\"role\": \"user\", \"content\": 3}]}", 1, BATON_E_FORMAT,
           "messages[0].content");
    refuse("{\"messages\": [{\"role\": \"user\", \"content\": [\"x\"]}]}", 1, BATON_E_FORMAT,
           "messages[0].content[0] must be an object");
    refuse("{\"messages\": [{\"role\": \"user\", \"content\": [{\"text\": \"x\"}]}]}", 1,
           BATON_E_FORMAT, "messages[0].content[0].type");
    refuse("{\"messages\": [{\"role\": \"user\", \"content\": [{\"type\": \"text\"}]}]}", 1,
           BATON_E_FORMAT, "messages[0].content[0].text");
    refuse("{\"messages\": [{\"role\": \"user\", \"content\": [{\"type\": \"text\","
           " \"text\": 1}]}]}",
           1, BATON_E_FORMAT, "messages[0].content[0].text");
    refuse("{\"messages\": [{\"role\": \"user\", \"content\": \"a\"},"
           " {\"role\": \"assistant\", \"content\": \"b\"},"
           " {\"role\": \"user\", \"content\": [{\"type\": \"text\", \"text\": \"x\"},"
           " {\"type\": \"image_url\", \"image_url\": {\"url\": \"u\"}}]}]}",
           1, BATON_E_UNSUPPORTED, "messages[2].content[1]");
    /* a later field's refusal frees the messages taken */
    refuse("{\"messages\": [{\"role\": \"user\", \"content\": \"a\"}], \"n\": 3}", 1,
           BATON_E_UNSUPPORTED, "\"n\"");

    /* BATON_SERVE_MAX_MESSAGES accepted (a system message, then users and
     * assistants in turn), one more refused */
    body = malloc(cap);
    assert_non_null(body);
    for (int extra = 0; extra < 2; extra++) {
        struct baton_serve_req req;
        char err[256] = "";
        const size_t n = BATON_SERVE_MAX_MESSAGES + (size_t)extra;
        int rc;

        at = (size_t)snprintf(body, cap, "{\"messages\": [");
        if (extra == 0)
            at += (size_t)snprintf(body + at, cap - at,
                                   "{\"role\": \"system\", \"content\": \"s\"},");
        for (size_t i = extra == 0 ? 1 : 0; i < n; i++)
            at += (size_t)snprintf(body + at, cap - at, "{\"role\": \"%s\", \"content\": \"m\"}%s",
                                   (i - (extra == 0)) % 2 == 0 ? "user" : "assistant",
                                   i + 1 < n ? "," : "]}");
        rc = baton_serve_req_parse(body, at, 1, &req, err, sizeof err);
        if (extra == 0) {
            if (rc != 0)
                fail_msg("%d %s", rc, err);
            assert_int_equal(req.n_msgs, BATON_SERVE_MAX_MESSAGES);
            assert_int_equal(req.msgs[0].role, BATON_SERVE_SYSTEM);
            assert_int_equal(req.msgs[BATON_SERVE_MAX_MESSAGES - 1].role, BATON_SERVE_USER);
            baton_serve_req_free(&req);
        } else {
            assert_int_equal(rc, BATON_E_LIMIT);
            assert_non_null(strstr(err, "\"messages\""));
        }
    }
    free(body);
}

/* A body with texts of sizes a and b (b: a second message, or a second
 * text part when parts, or none when 0): accepted exactly when the sum is
 * at most the limit. */
static void check_text_limit(int chat, int parts, size_t a, size_t b)
{
    const size_t cap = a + b + 512;
    char *body = malloc(cap), err[256] = "";
    struct baton_serve_req req;
    size_t at = 0;
    int rc;

    assert_non_null(body);
    if (!chat) {
        at += (size_t)snprintf(body, cap, "{\"prompt\": \"");
        memset(body + at, 'x', a);
        at += a;
        at += (size_t)snprintf(body + at, cap - at, "\"}");
    } else {
        at += (size_t)snprintf(body, cap, "{\"messages\": [{\"role\": \"%s\", \"content\": %s",
                               parts ? "user" : "system",
                               parts ? "[{\"type\": \"text\", \"text\": \"" : "\"");
        memset(body + at, 'x', a);
        at += a;
        at += (size_t)snprintf(body + at, cap - at, "%s",
                               parts ? "\"}, {\"type\": \"text\", \"text\": \""
                                     : "\"}, {\"role\": \"user\", \"content\": \"");
        memset(body + at, 'y', b);
        at += b;
        at += (size_t)snprintf(body + at, cap - at, "%s", parts ? "\"}]}]}" : "\"}]}");
    }
    rc = baton_serve_req_parse(body, at, chat, &req, err, sizeof err);
    if (a + b <= BATON_TOKENIZER_MAX_TEXT_BYTES) {
        if (rc != 0)
            fail_msg("%zu + %zu bytes: %d %s", a, b, rc, err);
        if (!chat) {
            assert_int_equal(req.prompt_len, a);
            assert_int_equal(strlen(req.prompt), a);
        } else if (parts) {
            assert_int_equal(req.msgs[0].len, a + b);
            assert_int_equal(strlen(req.msgs[0].text), a + b);
            assert_int_equal(req.msgs[0].text[a], b > 0 ? 'y' : 0);
        } else {
            assert_int_equal(req.msgs[0].len, a);
            assert_int_equal(req.msgs[1].len, b);
        }
        baton_serve_req_free(&req);
    } else {
        assert_int_equal(rc, BATON_E_LIMIT);
        assert_non_null(strstr(err, "text"));
        assert_memory_equal(&req, &zero_req, sizeof req);
    }
    free(body);
}

static void test_text_limit(void **state)
{
    const size_t max = BATON_TOKENIZER_MAX_TEXT_BYTES;

    (void)state;
    check_text_limit(0, 0, max, 0);
    check_text_limit(0, 0, max + 1, 0);
    check_text_limit(1, 0, max - 10, 10);
    check_text_limit(1, 0, max - 10, 11);
    check_text_limit(1, 1, max - 3, 3);
    check_text_limit(1, 1, max - 3, 4);
}

/* clean(in) == want, byte for byte. */
static void expect_clean(const char *in, size_t n, const char *want, size_t want_len)
{
    size_t len = 99;
    char *out = baton_serve_utf8_clean(in, n, &len);

    assert_non_null(out);
    assert_int_equal(len, want_len);
    assert_memory_equal(out, want, want_len);
    assert_int_equal(out[len], 0);
    free(out);
}

#define CLEAN(in, want) expect_clean(in, sizeof(in) - 1, want, sizeof(want) - 1)
#define R "\xEF\xBF\xBD" /* U+FFFD */

/* /tokenize and /detokenize bodies: fields, defaults, refusals. */
static void tok_refuse(const char *body, int detok, int want, const char *names)
{
    static const struct baton_serve_tok_req zero;
    struct baton_serve_tok_req t;
    char err[256] = "";
    int rc;

    memset(&t, 0xA5, sizeof t);
    rc = baton_serve_tok_parse(body, strlen(body), detok, &t, err, sizeof err);
    if (rc != want || strstr(err, names) == NULL)
        fail_msg("%s: status %d (want %d), message \"%s\" (want \"%s\" in it)", body, rc, want,
                 err, names);
    assert_memory_equal(&t, &zero, sizeof t);
}

static void test_tokenize_bodies(void **state)
{
    struct baton_serve_tok_req t;
    char err[256] = "";
    const char *b1 = "{\"content\": \"caf\\u00e9<|im_end|>\", \"model\": \"x\"}";
    const char *b2 = "{\"content\": \"\", \"add_special\": true, \"parse_special\": false,"
                     " \"with_pieces\": true}";
    const char *b3 = "{\"tokens\": [0, 151645, 2147483647], \"content\": 5}";
    char *big;

    (void)state;
    assert_int_equal(baton_serve_tok_parse(b1, strlen(b1), 0, &t, err, sizeof err), 0);
    assert_string_equal(t.content, "caf\xc3\xa9<|im_end|>");
    assert_int_equal(t.content_len, 15);
    assert_true(t.add_special == 0 && t.parse_special == 1 && t.with_pieces == 0);
    assert_true(t.tokens == NULL && t.n_tokens == 0 && t.detokenize == 0);
    baton_serve_tok_free(&t);
    assert_int_equal(baton_serve_tok_parse(b2, strlen(b2), 0, &t, err, sizeof err), 0);
    assert_true(t.content_len == 0 && t.content != NULL && t.content[0] == 0);
    assert_true(t.add_special == 1 && t.parse_special == 0 && t.with_pieces == 1);
    baton_serve_tok_free(&t);
    /* detokenize reads only "tokens" */
    assert_int_equal(baton_serve_tok_parse(b3, strlen(b3), 1, &t, err, sizeof err), 0);
    assert_true(t.detokenize == 1 && t.n_tokens == 3 && t.content == NULL);
    assert_true(t.tokens[0] == 0 && t.tokens[1] == 151645 && t.tokens[2] == INT32_MAX);
    baton_serve_tok_free(&t);
    assert_int_equal(baton_serve_tok_parse("{\"tokens\": []}", 14, 1, &t, err, sizeof err), 0);
    assert_true(t.n_tokens == 0 && t.tokens == NULL);
    baton_serve_tok_free(&t);

    tok_refuse("{}", 0, BATON_E_FORMAT, "\"content\" is missing");
    tok_refuse("{\"content\": null}", 0, BATON_E_FORMAT, "\"content\" is missing");
    tok_refuse("{\"content\": [\"a\"]}", 0, BATON_E_FORMAT, "\"content\" must be a string");
    tok_refuse("{\"content\": \"a\", \"parse_special\": 0}", 0, BATON_E_FORMAT,
               "\"parse_special\" must be true or false");
    tok_refuse("{\"content\": \"a\\u0000\"}", 0, BATON_E_FORMAT, "NUL");
    tok_refuse("[1]", 1, BATON_E_FORMAT, "must be a JSON object");
    tok_refuse("{\"tokens\": 1}", 1, BATON_E_FORMAT, "\"tokens\" must be an array");
    tok_refuse("{}", 1, BATON_E_FORMAT, "\"tokens\" is missing");
    tok_refuse("{\"tokens\": [1, 2.0]}", 1, BATON_E_FORMAT, "\"tokens\"[1] must be an integer");
    tok_refuse("{\"tokens\": [2147483648]}", 1, BATON_E_FORMAT, "\"tokens\"[0]");
    tok_refuse("{\"tokens\": [-1]}", 1, BATON_E_FORMAT, "\"tokens\"[0]");
    /* the most ids, one more */
    big = malloc(20 + 2 * (BATON_SERVE_MAX_DETOKENIZE + 1));
    assert_non_null(big);
    for (uint32_t extra = 0; extra < 2; extra++) {
        size_t n = (size_t)sprintf(big, "{\"tokens\": [");

        for (uint32_t i = 0; i < BATON_SERVE_MAX_DETOKENIZE + extra; i++)
            n += (size_t)sprintf(big + n, i ? ",7" : "7");
        strcpy(big + n, "]}");
        if (extra)
            tok_refuse(big, 1, BATON_E_LIMIT, "more than 131072 ids");
        else {
            assert_int_equal(baton_serve_tok_parse(big, strlen(big), 1, &t, err, sizeof err), 0);
            assert_int_equal(t.n_tokens, BATON_SERVE_MAX_DETOKENIZE);
            baton_serve_tok_free(&t);
        }
    }
    free(big);
}

static void test_utf8_clean(void **state)
{
    (void)state;
    CLEAN("", "");
    CLEAN("plain ascii", "plain ascii");
    /* valid 2, 3 and 4 bytes, and each row's edges of Table 3-7 */
    CLEAN("\xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80", "\xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80");
    CLEAN("\xC2\x80\xDF\xBF\xE0\xA0\x80\xED\x9F\xBF\xEE\x80\x80\xF0\x90\x80\x80\xF4\x8F\xBF\xBF",
          "\xC2\x80\xDF\xBF\xE0\xA0\x80\xED\x9F\xBF\xEE\x80\x80\xF0\x90\x80\x80\xF4\x8F\xBF\xBF");
    CLEAN("a\xC0\x80z", "a" R R "z");   /* overlong NUL: C0 never valid */
    CLEAN("\xC1\xBF", R R);             /* overlong */
    CLEAN("\xE0\x80\x80", R R R);       /* overlong: 80 not in A0..BF */
    CLEAN("\xED\xA0\x80", R R R);       /* a surrogate */
    CLEAN("\xF4\x90\x80\x80", R R R R); /* past U+10FFFF */
    CLEAN("\xF5\x80", R R);             /* F5 never valid */
    CLEAN("\xFF", R);
    CLEAN("ab\xE2\x82", "ab" R);                     /* cut at the end: one subpart */
    CLEAN("\xE2\x82z", R "z");                       /* cut before ASCII */
    CLEAN("\xF0\x9F\x98", R);                        /* cut 4-byte */
    CLEAN("\xF0\x9F\xE2\x82\xAC", R "\xE2\x82\xAC"); /* cut by another lead */
    CLEAN("\x80\xBF", R R);                          /* stray continuations */
    CLEAN("\xE2\x82\xAC\x80", "\xE2\x82\xAC" R);     /* one too many */
    /* Unicode's own example (Table 3-8): 61 F1 80 80 E1 80 C2 62 80 63 80 BF 64 */
    CLEAN("\x61\xF1\x80\x80\xE1\x80\xC2\x62\x80\x63\x80\xBF\x64",
          "\x61" R R R "\x62" R "\x63" R R "\x64");
    /* a NUL byte becomes U+FFFD too */
    expect_clean("a\0b", 3, "a" R "b", 5);
    expect_clean("\0", 1, R, 3);
}

static void test_utf8_complete(void **state)
{
    (void)state;
    assert_int_equal(baton_serve_utf8_complete("", 0), 0);
    assert_int_equal(baton_serve_utf8_complete("abc", 3), 3);
    assert_int_equal(baton_serve_utf8_complete("a\xE2\x82", 3), 1);
    assert_int_equal(baton_serve_utf8_complete("a\xE2", 2), 1);
    assert_int_equal(baton_serve_utf8_complete("a\xE2\x82\xAC", 4), 4);
    assert_int_equal(baton_serve_utf8_complete("a\x80", 2), 2);
    assert_int_equal(baton_serve_utf8_complete("\xF0\x9F", 2), 0);
    assert_int_equal(baton_serve_utf8_complete("\xF0\x9F\x98", 3), 0);
    assert_int_equal(baton_serve_utf8_complete("\xF0\x9F\x98\x80", 4), 4);
    assert_int_equal(baton_serve_utf8_complete("\xC0", 1), 1); /* never valid */
    assert_int_equal(baton_serve_utf8_complete("\xC3", 1), 0);
    assert_int_equal(baton_serve_utf8_complete("\xE0\x80", 2), 2); /* 80: never after E0 */
    assert_int_equal(baton_serve_utf8_complete("\xED\xA0", 2), 2); /* a surrogate's start */
    assert_int_equal(baton_serve_utf8_complete("\xF4\x90", 2), 2); /* past U+10FFFF */
    assert_int_equal(baton_serve_utf8_complete("\xF4\x8F\xBF", 3), 0);
    assert_int_equal(baton_serve_utf8_complete("\xE2\x82\xE2\x82", 4), 2);
    assert_int_equal(baton_serve_utf8_complete("x\x80\x80\x80", 4), 4);
    assert_int_equal(baton_serve_utf8_complete("\xE2\x82\xAC\xC3", 4), 3);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_prompt_minimal), cmocka_unit_test(test_prompt_every_field),
        cmocka_unit_test(test_null_is_absent), cmocka_unit_test(test_field_refusals),
        cmocka_unit_test(test_stop),           cmocka_unit_test(test_unsupported),
        cmocka_unit_test(test_json_refusals),
        cmocka_unit_test(test_chat),           cmocka_unit_test(test_chat_order),
        cmocka_unit_test(test_chat_refusals),  cmocka_unit_test(test_text_limit),
        cmocka_unit_test(test_utf8_clean),     cmocka_unit_test(test_utf8_complete),
        cmocka_unit_test(test_tokenize_bodies),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
