/* src/server/handles.c under AddressSanitizer: a buffer's mapping is
 * poisoned beyond its size (issue 16, "Overruns visible").
 *
 * Without arguments: cmocka tests that ask ASan's interface which bytes are
 * poisoned (skipped in a build without ASan). With --overrun: reads one
 * byte past a buffer's size through the buffer's base pointer, which must
 * end the program with ASan's report; the ctest test
 * test_server_handles_asan_overrun (registered only with BATON_SANITIZE)
 * passes when the output holds that report. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "baton/status.h"
#include "server/handles.h"

#if defined(__SANITIZE_ADDRESS__)
#define HAVE_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define HAVE_ASAN 1
#endif
#endif
#ifdef HAVE_ASAN
#include <sanitizer/asan_interface.h>
#endif

#define S1 11u

#ifdef HAVE_ASAN
static uint64_t page(void)
{
    return (uint64_t)sysconf(_SC_PAGESIZE);
}

/* Allocates size bytes, then: every byte of the buffer is addressable, and
 * every byte after it up to the end of its last page is poisoned. */
static void check_size(struct baton_handle_table *t, uint64_t size)
{
    struct baton_buf_ref r;
    uint64_t h, mapped = (size + page() - 1) / page() * page();
    assert_int_equal(baton_handles_alloc(t, S1, size, &h), 0);
    assert_int_equal(baton_handles_acquire(t, S1, h, &r), 0);
    assert_int_equal(r.size, size);
    assert_null(__asan_region_is_poisoned(r.mem, (size_t)size));
    for (uint64_t i = size; i < mapped; i++)
        assert_true(__asan_address_is_poisoned(r.mem + i));
    baton_handles_release(t, &r);
    assert_int_equal(baton_handles_free(t, S1, h), 0);
}

static void test_slack_poisoned(void **state)
{
    struct baton_handle_table *t;
    const uint64_t sizes[] = {1, 7, 8, 9, 100, page() - 1, page(), page() + 3, 3 * page() + 17};
    (void)state;
    assert_int_equal(baton_handles_create(1u << 20, &t), 0);
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++)
        check_size(t, sizes[i]);
    baton_handles_destroy(t);
}

/* A freed buffer's poison does not outlive its mapping: a larger buffer
 * mapped next (the kernel hands out the address just unmapped) is
 * addressable in full. */
static void test_unpoisoned_when_unmapped(void **state)
{
    struct baton_handle_table *t;
    struct baton_buf_ref r;
    uint64_t h;
    (void)state;
    assert_int_equal(baton_handles_create(1u << 20, &t), 0);
    for (int round = 0; round < 4; round++) {
        assert_int_equal(baton_handles_alloc(t, S1, 5, &h), 0);
        assert_int_equal(baton_handles_free(t, S1, h), 0);
        assert_int_equal(baton_handles_alloc(t, S1, page(), &h), 0);
        assert_int_equal(baton_handles_acquire(t, S1, h, &r), 0);
        assert_null(__asan_region_is_poisoned(r.mem, (size_t)page()));
        memset(r.mem, 0x5a, (size_t)page());
        baton_handles_release(t, &r);
        assert_int_equal(baton_handles_free(t, S1, h), 0);
    }
    baton_handles_destroy(t);
}
#else
static void test_slack_poisoned(void **state)
{
    (void)state;
    skip(); /* only an ASan build poisons */
}

static void test_unpoisoned_when_unmapped(void **state)
{
    (void)state;
    skip();
}
#endif

/* The death test's body: one byte past a 100-byte buffer, read through its
 * base pointer as a handler would. Returns only when nothing reported it. */
static int overrun(void)
{
    struct baton_handle_table *t;
    struct baton_buf_ref r;
    uint64_t h;
    if (baton_handles_create(1u << 20, &t) != 0 || baton_handles_alloc(t, S1, 100, &h) != 0 ||
        baton_handles_acquire(t, S1, h, &r) != 0) {
        fprintf(stderr, "setup failed\n");
        return 2;
    }
    const volatile uint8_t *p = r.mem;
    uint8_t v = p[r.size];
    fprintf(stderr, "read byte %u past the buffer unreported\n", v);
    baton_handles_release(t, &r);
    baton_handles_destroy(t);
    return 1;
}

int main(int argc, char **argv)
{
    if (argc == 2 && strcmp(argv[1], "--overrun") == 0)
        return overrun();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_slack_poisoned),
        cmocka_unit_test(test_unpoisoned_when_unmapped),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
