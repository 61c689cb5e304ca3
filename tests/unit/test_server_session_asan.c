/* src/server/session.c under AddressSanitizer: a session's scratch arena
 * (mmap'ed, grown geometrically) is poisoned past the bytes the current
 * reservation asked for (issue 16, "Overruns visible").
 *
 * Without arguments: cmocka tests that ask ASan's interface which bytes are
 * poisoned (skipped in a build without ASan). With --overrun: writes one
 * byte past a reservation, inside the arena's mapping, as a graph node
 * overrunning its plan would; that must end the program with ASan's
 * report. The ctest test test_server_session_asan_overrun (registered only
 * with BATON_SANITIZE) passes when the output holds that report. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "baton/status.h"
#include "server/server.h"
#include "server/server_internal.h"

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

#define SESSION_ID 5u

static struct baton_server *new_server(void)
{
    struct baton_server_config cfg;
    struct baton_server *s = NULL;
    baton_server_config_default(&cfg);
    cfg.quiet = 1;
    cfg.total_memory_bytes = 8u << 20;
    cfg.max_scratch_bytes = 4u << 20;
    if (baton_server_create(&cfg, &s) != 0)
        return NULL;
    return s;
}

#ifdef HAVE_ASAN
/* Bytes [0, n) of the arena addressable, [n, scratch_bytes) poisoned. */
static void check_live(const struct baton_session *sess, uint64_t n)
{
    assert_non_null(sess->scratch);
    assert_true(n <= sess->scratch_bytes);
    assert_null(__asan_region_is_poisoned(sess->scratch, (size_t)n));
    for (uint64_t i = n; i < sess->scratch_bytes; i++)
        assert_true(__asan_address_is_poisoned(sess->scratch + i));
}

/* Growing, shrinking and regrowing reservations: each one's size is the
 * live range, whatever the arena's mapping is (it grows geometrically and
 * is kept when a later graph needs less). */
static void test_poisoned_past_reservation(void **state)
{
    struct baton_server *s = new_server();
    struct baton_session sess;
    const uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE);
    const uint64_t sizes[] = {1, 100, page - 1, page, 3 * page + 17, 5, 0, 3 * page + 17,
                              9 * page + 3, 64};
    (void)state;
    assert_non_null(s);
    session_init(&sess, SESSION_ID);
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        assert_int_equal(session_reserve_scratch(s, &sess, sizes[i]), 0);
        assert_true(sess.scratch_bytes >= sizes[i]);
        check_live(&sess, sizes[i]);
        memset(sess.scratch, 0x5a, (size_t)sizes[i]);
    }
    session_end(s, &sess);
    baton_server_destroy(s);
}

/* An arena's poison does not outlive its mapping: an arena mapped after
 * one was unmapped (the kernel often hands out the same address) is
 * addressable over its reservation, and so is memory mapped there
 * without the session. */
static void test_unpoisoned_when_unmapped(void **state)
{
    struct baton_server *s = new_server();
    struct baton_session sess;
    (void)state;
    assert_non_null(s);
    for (int round = 0; round < 4; round++) {
        session_init(&sess, SESSION_ID);
        assert_int_equal(session_reserve_scratch(s, &sess, 7), 0);
        check_live(&sess, 7);
        uint64_t old_bytes = sess.scratch_bytes;
        session_end(s, &sess);
        assert_null(sess.scratch);
        session_init(&sess, SESSION_ID);
        assert_int_equal(session_reserve_scratch(s, &sess, old_bytes), 0);
        check_live(&sess, old_bytes);
        memset(sess.scratch, 0xa5, (size_t)old_bytes);
        session_end(s, &sess);
    }
    baton_server_destroy(s);
}
#else
static void test_poisoned_past_reservation(void **state)
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

/* The death test's body: one byte written past a 100-byte reservation,
 * inside the arena's page. Returns only when nothing reported it. */
static int overrun(void)
{
    struct baton_server *s = new_server();
    struct baton_session sess;
    if (!s) {
        fprintf(stderr, "setup failed\n");
        return 2;
    }
    session_init(&sess, SESSION_ID);
    if (session_reserve_scratch(s, &sess, 100) != 0 || sess.scratch_bytes <= 100) {
        fprintf(stderr, "setup failed\n");
        return 2;
    }
    volatile uint8_t *p = sess.scratch;
    p[100] = 1;
    fprintf(stderr, "wrote a byte past the reservation unreported\n");
    session_end(s, &sess);
    baton_server_destroy(s);
    return 1;
}

int main(int argc, char **argv)
{
    if (argc == 2 && strcmp(argv[1], "--overrun") == 0)
        return overrun();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_poisoned_past_reservation),
        cmocka_unit_test(test_unpoisoned_when_unmapped),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
