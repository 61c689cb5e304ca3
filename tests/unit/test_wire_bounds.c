/* Range check, checked multiply and the little-endian integer readers. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "baton/status.h"
#include "wire/wire.h"

static void test_check_range(void **state)
{
    (void)state;
    assert_int_equal(baton_wire_check_range(0, 0, 0), 0);
    assert_int_equal(baton_wire_check_range(0, 10, 10), 0);
    assert_int_equal(baton_wire_check_range(10, 0, 10), 0);
    assert_int_equal(baton_wire_check_range(4, 6, 10), 0);
    assert_int_equal(baton_wire_check_range(4, 7, 10), BATON_E_BOUNDS);
    assert_int_equal(baton_wire_check_range(11, 0, 10), BATON_E_BOUNDS);
    /* off + n wraps to 9 < 10: an adding check would accept this. */
    assert_int_equal(baton_wire_check_range(10, UINT64_MAX, 10), BATON_E_BOUNDS);
    assert_int_equal(baton_wire_check_range(UINT64_MAX, 1, UINT64_MAX), BATON_E_BOUNDS);
    assert_int_equal(baton_wire_check_range(UINT64_MAX, 0, UINT64_MAX), 0);
    assert_int_equal(baton_wire_check_range(1, UINT64_MAX - 1, UINT64_MAX), 0);
}

static void test_mul(void **state)
{
    uint64_t r = 77;
    (void)state;
    assert_int_equal(baton_wire_mul_u64(0, UINT64_MAX, &r), 0);
    assert_true(r == 0);
    assert_int_equal(baton_wire_mul_u64(UINT64_MAX, 1, &r), 0);
    assert_true(r == UINT64_MAX);
    assert_int_equal(baton_wire_mul_u64(1ull << 32, (1ull << 32) - 1, &r), 0);
    assert_true(r == 0xFFFFFFFF00000000ull);
    r = 77;
    assert_int_equal(baton_wire_mul_u64(1ull << 32, 1ull << 32, &r), BATON_E_OVERFLOW);
    assert_true(r == 77);
    assert_int_equal(baton_wire_mul_u64(3, 0x5555555555555556ull, &r), BATON_E_OVERFLOW);
    assert_int_equal(baton_wire_mul_u64(3, 0x5555555555555555ull, &r), 0);
    assert_true(r == UINT64_MAX);
}

static void test_get_ints(void **state)
{
    const uint8_t b[] = {0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08, 0xF0, 0xFF};
    size_t pos = 0;
    uint8_t v8;
    uint16_t v16;
    uint32_t v32;
    uint64_t v64;
    (void)state;

    assert_int_equal(baton_wire_get_u8(b, sizeof b, &pos, &v8), 0);
    assert_int_equal(v8, 0x01);
    assert_int_equal(pos, 1);
    assert_int_equal(baton_wire_get_u16(b, sizeof b, &pos, &v16), 0);
    assert_int_equal(v16, 0x0302);
    assert_int_equal(pos, 3);
    assert_int_equal(baton_wire_get_u32(b, sizeof b, &pos, &v32), 0);
    assert_int_equal(v32, 0x07060504u);
    assert_int_equal(pos, 7);
    /* 3 bytes left: u64 and u32 truncated, cursor unchanged */
    assert_int_equal(baton_wire_get_u64(b, sizeof b, &pos, &v64), BATON_E_TRUNCATED);
    assert_int_equal(baton_wire_get_u32(b, sizeof b, &pos, &v32), BATON_E_TRUNCATED);
    assert_int_equal(pos, 7);
    assert_int_equal(baton_wire_get_u16(b, sizeof b, &pos, &v16), 0);
    assert_int_equal(v16, 0xF008);
    assert_int_equal(baton_wire_get_u8(b, sizeof b, &pos, &v8), 0);
    assert_int_equal(v8, 0xFF);
    assert_int_equal(pos, 10);
    assert_int_equal(baton_wire_get_u8(b, sizeof b, &pos, &v8), BATON_E_TRUNCATED);
    assert_int_equal(pos, 10);

    pos = 2;
    assert_int_equal(baton_wire_get_u64(b, sizeof b, &pos, &v64), 0);
    assert_true(v64 == 0xFFF0080706050403ull);
    assert_int_equal(pos, 10);

    /* a cursor past the end is truncation, not a wrap */
    pos = 11;
    assert_int_equal(baton_wire_get_u8(b, sizeof b, &pos, &v8), BATON_E_TRUNCATED);
    assert_int_equal(pos, 11);
    pos = 0;
    assert_int_equal(baton_wire_get_u8(NULL, 0, &pos, &v8), BATON_E_TRUNCATED);
    assert_int_equal(pos, 0);
}

static void test_put_ints(void **state)
{
    uint8_t b[8];
    const uint8_t want64[8] = {0xEF, 0xCD, 0xAB, 0x89, 0x67, 0x45, 0x23, 0x01};
    (void)state;
    baton_wire_put_u16(b, 0xBEEF);
    assert_int_equal(b[0], 0xEF);
    assert_int_equal(b[1], 0xBE);
    baton_wire_put_u32(b, 0x12345678u);
    assert_int_equal(b[0], 0x78);
    assert_int_equal(b[3], 0x12);
    baton_wire_put_u64(b, 0x0123456789ABCDEFull);
    assert_memory_equal(b, want64, 8);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_check_range),
        cmocka_unit_test(test_mul),
        cmocka_unit_test(test_get_ints),
        cmocka_unit_test(test_put_ints),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
