/* baton_meminfo_available: the MemAvailable figure gen-model compares its
 * model with (proc(5) format), and the cases where it falls back to RAM. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "baton/status.h"
#include "model/meminfo.h"

static int parse(const char *text, uint64_t *bytes)
{
    return baton_meminfo_available(text, strlen(text), bytes);
}

static void meminfo_available_in_bytes(void **state)
{
    /* the head of a real /proc/meminfo (Linux 6.1): 24033632 kB */
    static const char text[] = "MemTotal:       24684096 kB\n"
                               "MemFree:        20314060 kB\n"
                               "MemAvailable:   24033632 kB\n"
                               "Buffers:           68484 kB\n";
    uint64_t bytes = 0;

    (void)state;
    assert_int_equal(parse(text, &bytes), 0);
    assert_int_equal(bytes, 24033632ull * 1024); /* 24,610,439,168 */
    /* the last line, with no newline after it */
    assert_int_equal(parse("MemTotal: 8 kB\nMemAvailable: 3 kB", &bytes), 0);
    assert_int_equal(bytes, 3072);
    /* the largest count whose bytes fit in 64 bits: 2^54 - 1 kB */
    assert_int_equal(parse("MemAvailable: 18014398509481983 kB\n", &bytes), 0);
    assert_int_equal(bytes, UINT64_MAX - 1023);
}

static void meminfo_available_refusals(void **state)
{
    uint64_t bytes = 77;

    (void)state;
    /* no such line (kernels before 3.14), or only as part of another name */
    assert_int_equal(parse("MemTotal: 8 kB\nMemFree: 4 kB\n", &bytes), BATON_E_NOT_FOUND);
    assert_int_equal(parse("XMemAvailable: 4 kB\n", &bytes), BATON_E_NOT_FOUND);
    assert_int_equal(parse("", &bytes), BATON_E_NOT_FOUND);
    /* malformed: no count, another unit, trailing text, a line cut short */
    assert_int_equal(parse("MemAvailable:  kB\n", &bytes), BATON_E_FORMAT);
    assert_int_equal(parse("MemAvailable: 4 MB\n", &bytes), BATON_E_FORMAT);
    assert_int_equal(parse("MemAvailable: 4 kB x\n", &bytes), BATON_E_FORMAT);
    assert_int_equal(parse("MemAvailable: 4", &bytes), BATON_E_FORMAT);
    assert_int_equal(parse("MemAvailable: -4 kB\n", &bytes), BATON_E_FORMAT);
    /* 2^54 kB is 2^64 bytes: does not fit */
    assert_int_equal(parse("MemAvailable: 18014398509481984 kB\n", &bytes), BATON_E_OVERFLOW);
    assert_int_equal(parse("MemAvailable: 99999999999999999999999 kB\n", &bytes),
                     BATON_E_OVERFLOW);
    assert_int_equal(bytes, 77); /* unchanged on every error */
    /* the length bounds the text: the line past it is not read */
    assert_int_equal(baton_meminfo_available("MemFree: 1 kB\nMemAvailable: 2 kB\n", 14, &bytes),
                     BATON_E_NOT_FOUND);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(meminfo_available_in_bytes),
        cmocka_unit_test(meminfo_available_refusals),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
