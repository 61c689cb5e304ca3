/* batond's log line forms (src/server/log.h): exact text, journal and JSON
 * lines, JSON escaping, UTC dates computed by hand, and a long message cut
 * to a line that is still one well-formed object. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "server/log.h"

static void test_text_and_journal(void **state)
{
    char buf[256];
    size_t n;
    (void)state;
    n = baton_log_format_line(buf, sizeof buf, BATON_LOG_TEXT, BATON_LOG_INFO, "connection", NULL,
                              0, 0, "session 7 closed");
    assert_string_equal(buf, "batond: session 7 closed\n");
    assert_int_equal(n, strlen(buf));
    n = baton_log_format_line(buf, sizeof buf, BATON_LOG_JOURNAL, BATON_LOG_WARNING, "error", NULL,
                              0, 0, "refused 10.0.0.1: E_LIMIT");
    assert_string_equal(buf, "<4>refused 10.0.0.1: E_LIMIT\n");
    baton_log_format_line(buf, sizeof buf, BATON_LOG_JOURNAL, BATON_LOG_ERR, NULL, NULL, 0, 0, "x");
    assert_string_equal(buf, "<3>x\n");
    /* a line break, ESC or DEL in a message cannot end the line or reach a
     * terminal raw; TAB and bytes over 0x7f pass */
    n = baton_log_format_line(buf, sizeof buf, BATON_LOG_TEXT, BATON_LOG_INFO, NULL, NULL, 0, 0,
                              "--port a\nbatond: forged\r\x1b[2J\x7f\tok \xc3\xa9");
    assert_string_equal(buf, "batond: --port a\\nbatond: forged\\r\\x1b[2J\\x7f\tok \xc3\xa9\n");
    assert_int_equal(n, strlen(buf));
    baton_log_format_line(buf, sizeof buf, BATON_LOG_JOURNAL, BATON_LOG_ERR, NULL, NULL, 0, 0,
                          "a\n<0>b");
    assert_string_equal(buf, "<3>a\\n<0>b\n");
    /* cut at an escape's start, never inside it: the line still ends */
    char small[70];
    memset(small, 0, sizeof small);
    baton_log_format_line(small, sizeof small, BATON_LOG_TEXT, BATON_LOG_INFO, NULL, NULL, 0, 0,
                          "0123456789012345678901234567890123456789012345678901234567\x01");
    assert_string_equal(small, "batond: 0123456789012345678901234567890123456789012345678901234567"
                               "\n");
}

static void test_json_fields_and_dates(void **state)
{
    char buf[512];
    const struct baton_log_field f[] = {{"host", "::1", 0}, {"port", NULL, 7340},
                                        {"neg", NULL, -5}};
    (void)state;
    baton_log_format_line(buf, sizeof buf, BATON_LOG_JSON, BATON_LOG_NOTICE, "startup", f, 3, 0,
                          "listening");
    assert_string_equal(buf, "{\"ts\":\"1970-01-01T00:00:00.000Z\",\"level\":\"notice\","
                             "\"kind\":\"startup\",\"msg\":\"listening\",\"host\":\"::1\","
                             "\"port\":7340,\"neg\":-5}\n");
    /* 2000-02-29 (a leap day of a year divisible by 400): 11016 days */
    baton_log_format_line(buf, sizeof buf, BATON_LOG_JSON, BATON_LOG_INFO, NULL, NULL, 0,
                          11016LL * 86400000 + 3723456, "m");
    assert_string_equal(buf, "{\"ts\":\"2000-02-29T01:02:03.456Z\",\"level\":\"info\","
                             "\"msg\":\"m\"}\n");
    /* 2100-03-01 (2100 is not a leap year): 47541 days; last ms of a day */
    baton_log_format_line(buf, sizeof buf, BATON_LOG_JSON, BATON_LOG_WARNING, NULL, NULL, 0,
                          47541LL * 86400000 - 1, "m");
    assert_string_equal(buf, "{\"ts\":\"2100-02-28T23:59:59.999Z\",\"level\":\"warning\","
                             "\"msg\":\"m\"}\n");
    /* 1969-12-31T23:59:59.000Z */
    baton_log_format_line(buf, sizeof buf, BATON_LOG_JSON, BATON_LOG_ERR, NULL, NULL, 0, -1000,
                          "m");
    assert_string_equal(buf, "{\"ts\":\"1969-12-31T23:59:59.000Z\",\"level\":\"err\","
                             "\"msg\":\"m\"}\n");
}

static void test_json_escaping(void **state)
{
    char buf[256];
    (void)state;
    baton_log_format_line(buf, sizeof buf, BATON_LOG_JSON, BATON_LOG_INFO, "k\"", NULL, 0, 0,
                          "a\"b\\c\nd\te\x01\xc3\xa9");
    assert_string_equal(buf, "{\"ts\":\"1970-01-01T00:00:00.000Z\",\"level\":\"info\","
                             "\"kind\":\"k\\\"\",\"msg\":\"a\\\"b\\\\c\\nd\\te\\u0001"
                             "\\ufffd\\ufffd\"}\n");
}

/* A message longer than the line: cut at an escape boundary, closed, and
 * the fields that no longer fit left out whole. */
static void test_json_cut(void **state)
{
    char buf[128], msg[400];
    const struct baton_log_field f = {"port", NULL, 1};
    (void)state;
    for (size_t i = 0; i < sizeof msg - 1; i++)
        msg[i] = i % 3 ? 'x' : '"';
    msg[sizeof msg - 1] = '\0';
    size_t n = baton_log_format_line(buf, sizeof buf, BATON_LOG_JSON, BATON_LOG_INFO, NULL, &f, 1,
                                     0, msg);
    assert_int_equal(n, strlen(buf));
    assert_true(n < sizeof buf);
    assert_string_equal(buf + n - 3, "\"}\n");
    assert_null(strstr(buf, "\"port\""));
    /* the string holds whole escapes only: no lone backslash before the quote */
    assert_true(buf[n - 4] != '\\' || buf[n - 5] == '\\');
    n = baton_log_format_line(buf, sizeof buf, BATON_LOG_TEXT, BATON_LOG_INFO, NULL, NULL, 0, 0,
                              msg);
    assert_int_equal(n, sizeof buf - 1);
    assert_int_equal(buf[n - 1], '\n');
}

static void test_format_parse(void **state)
{
    enum baton_log_format f = BATON_LOG_TEXT;
    (void)state;
    assert_int_equal(baton_log_format_parse("json", &f), 0);
    assert_int_equal(f, BATON_LOG_JSON);
    assert_int_equal(baton_log_format_parse("journal", &f), 0);
    assert_int_equal(f, BATON_LOG_JOURNAL);
    assert_int_equal(baton_log_format_parse("text", &f), 0);
    assert_int_equal(f, BATON_LOG_TEXT);
    assert_int_equal(baton_log_format_parse("JSON", &f), -1);
    assert_int_equal(baton_log_format_parse("", &f), -1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_text_and_journal), cmocka_unit_test(test_json_fields_and_dates),
        cmocka_unit_test(test_json_escaping),    cmocka_unit_test(test_json_cut),
        cmocka_unit_test(test_format_parse),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
