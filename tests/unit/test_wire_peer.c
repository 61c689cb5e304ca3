/* Direct-path decoders of src/wire/peer.c: GRANT_WRITE request, grant id,
 * COPY_TENSOR_TO destination, PEER_WRITE header (40 bytes), COPY_TENSOR_TO
 * reply (outcomes 0..9). The options and PEER_FENCE (src/wire/pipeline.c)
 * are in test_wire_pipeline.c.
 * Hand-written bytes (docs/PROTOCOL.md "Direct path"), byte-exact round
 * trips through the encoders, every failure code, and the cursor unchanged
 * on every failure (each record is decoded after 3 junk bytes). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "baton/status.h"
#include "wire/wire.h"

#define AT 3 /* junk bytes before every record */

/* ---- GRANT_WRITE request ---- */

static const uint8_t grant_req[AT + 24] = {
    0xEE, 0xEE, 0xEE,
    /* handle 0x0000000700000002 */ 2, 0, 0, 0, 7, 0, 0, 0,
    /* offset 0x40 */ 0x40, 0, 0, 0, 0, 0, 0, 0,
    /* length 0x1000 */ 0, 0x10, 0, 0, 0, 0, 0, 0,
};

static void test_grant_request(void **state)
{
    struct baton_grant_request g;
    uint8_t b[sizeof grant_req], enc[24];
    size_t pos = AT;
    (void)state;

    assert_int_equal(baton_wire_decode_grant_request(grant_req, sizeof grant_req, &pos, &g), 0);
    assert_int_equal(pos, AT + 24);
    assert_true(g.handle == 0x0000000700000002ull && g.offset == 0x40 && g.length == 0x1000);
    baton_wire_encode_grant_request(enc, &g);
    assert_memory_equal(enc, grant_req + AT, 24);

    for (size_t n = 0; n < 24; n++) {
        pos = AT;
        assert_int_equal(baton_wire_decode_grant_request(grant_req, AT + n, &pos, &g),
                         BATON_E_TRUNCATED);
        assert_int_equal(pos, AT);
    }
    pos = sizeof grant_req + 1; /* cursor past the end */
    assert_int_equal(baton_wire_decode_grant_request(grant_req, sizeof grant_req, &pos, &g),
                     BATON_E_TRUNCATED);
    memcpy(b, grant_req, sizeof b);
    b[AT + 17] = 0; /* length 0 */
    pos = AT;
    assert_int_equal(baton_wire_decode_grant_request(b, sizeof b, &pos, &g), BATON_E_INVAL);
    assert_int_equal(pos, AT);
    /* offset 2^64 - 0x1000 + length 0x1000 wraps by exactly one */
    memset(b + AT + 8, 0, 8);
    b[AT + 9] = 0xF0;
    memset(b + AT + 10, 0xFF, 6);
    b[AT + 17] = 0x10;
    pos = AT;
    assert_int_equal(baton_wire_decode_grant_request(b, sizeof b, &pos, &g), BATON_E_OVERFLOW);
    assert_int_equal(pos, AT);
    b[AT + 8] = 0xFF;
    b[AT + 9] = 0xEF; /* offset 2^64 - 0x1001: ends at 2^64 - 1, fits */
    pos = AT;
    assert_int_equal(baton_wire_decode_grant_request(b, sizeof b, &pos, &g), 0);
    assert_true(g.offset == UINT64_MAX - 0x1000 && g.length == 0x1000);
}

/* ---- grant id ---- */

static void test_grant_id(void **state)
{
    uint8_t b[AT + 16], id[16];
    size_t pos;
    (void)state;

    memset(b, 0xEE, AT);
    for (int i = 0; i < 16; i++)
        b[AT + i] = (uint8_t)(0x80 + i);
    pos = AT;
    assert_int_equal(baton_wire_decode_grant_id(b, sizeof b, &pos, id), 0);
    assert_int_equal(pos, AT + 16);
    assert_memory_equal(id, b + AT, 16);
    for (size_t n = 0; n < 16; n++) {
        pos = AT;
        assert_int_equal(baton_wire_decode_grant_id(b, AT + n, &pos, id), BATON_E_TRUNCATED);
        assert_int_equal(pos, AT);
    }
    memset(b + AT, 0, 16);
    pos = AT;
    assert_int_equal(baton_wire_decode_grant_id(b, sizeof b, &pos, id), BATON_E_INVAL);
    assert_int_equal(pos, AT);
    b[AT + 15] = 1; /* one non-zero byte is enough */
    assert_int_equal(baton_wire_decode_grant_id(b, sizeof b, &pos, id), 0);
    assert_int_equal(id[15], 1);
}

/* ---- COPY_TENSOR_TO destination ---- */

/* 10.1.2.3:7340 (0x1CAC), grant 0xC0.., offset 0x20 */
static void dest_v4(uint8_t b[AT + 48])
{
    memset(b, 0, AT + 48);
    memset(b, 0xEE, AT);
    b[AT + 0] = 4;
    b[AT + 2] = 0xAC;
    b[AT + 3] = 0x1C;
    b[AT + 8] = 10;
    b[AT + 9] = 1;
    b[AT + 10] = 2;
    b[AT + 11] = 3;
    for (int i = 0; i < 16; i++)
        b[AT + 24 + i] = (uint8_t)(0xC0 + i);
    b[AT + 40] = 0x20;
}

static int decode_dest(const uint8_t *b, size_t len, struct baton_peer_dest *d)
{
    size_t pos = AT;
    int rc = baton_wire_decode_peer_dest(b, len, &pos, d);
    assert_int_equal(pos, rc == 0 ? AT + 48 : AT);
    return rc;
}

static void test_peer_dest(void **state)
{
    uint8_t b[AT + 48], enc[48];
    struct baton_peer_dest d;
    (void)state;

    dest_v4(b);
    assert_int_equal(decode_dest(b, sizeof b, &d), 0);
    assert_int_equal(d.family, 4);
    assert_int_equal(d.port, 7340);
    assert_memory_equal(d.addr, b + AT + 8, 16);
    assert_memory_equal(d.grant, b + AT + 24, 16);
    assert_true(d.grant_offset == 0x20);
    baton_wire_encode_peer_dest(enc, &d);
    assert_memory_equal(enc, b + AT, 48);
    for (size_t n = 0; n < 48; n++)
        assert_int_equal(decode_dest(b, AT + n, &d), BATON_E_TRUNCATED);

    /* IPv6 [fd00::2]: all 16 bytes are the address */
    b[AT] = 6;
    b[AT + 8] = 0xFD;
    b[AT + 9] = 0;
    b[AT + 10] = 0;
    b[AT + 11] = 0;
    b[AT + 23] = 2;
    assert_int_equal(decode_dest(b, sizeof b, &d), 0);
    assert_int_equal(d.family, 6);
    assert_int_equal(d.addr[15], 2);
    /* ... but for IPv4 bytes 4..15 of the address are padding, 0 */
    b[AT] = 4;
    assert_int_equal(decode_dest(b, sizeof b, &d), BATON_E_INVAL);

    const size_t bad[] = {1, 4, 5, 6, 7}; /* reserved bytes */
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        dest_v4(b);
        b[AT + bad[i]] = 1;
        assert_int_equal(decode_dest(b, sizeof b, &d), BATON_E_INVAL);
    }
    const uint8_t families[] = {1, 2, 3, 5, 7, 41, 255};
    for (size_t i = 0; i < sizeof families; i++) {
        dest_v4(b);
        b[AT] = families[i];
        assert_int_equal(decode_dest(b, sizeof b, &d), BATON_E_INVAL);
    }
    dest_v4(b);
    b[AT + 2] = b[AT + 3] = 0; /* port 0 */
    assert_int_equal(decode_dest(b, sizeof b, &d), BATON_E_INVAL);
    dest_v4(b);
    memset(b + AT + 24, 0, 16); /* no grant */
    assert_int_equal(decode_dest(b, sizeof b, &d), BATON_E_INVAL);

    /* family 0: the statistics query, every other field 0 */
    memset(b + AT, 0, 48);
    assert_int_equal(decode_dest(b, sizeof b, &d), 0);
    assert_int_equal(d.family, 0);
    assert_int_equal(d.port, 0);
    for (size_t i = 2; i < 48; i++) {
        if (i >= 4 && i < 8)
            continue; /* reserved, checked above */
        memset(b + AT, 0, 48);
        b[AT + i] = 0x01;
        assert_int_equal(decode_dest(b, sizeof b, &d), BATON_E_INVAL);
    }
}

/* ---- PEER_WRITE header ---- */

static void test_peer_write(void **state)
{
    uint8_t b[AT + 40 + 5], enc[40];
    struct baton_peer_write_header w;
    size_t pos;
    (void)state;

    memset(b, 0xEE, sizeof b); /* the data bytes after the header are not read */
    for (int i = 0; i < 16; i++)
        b[AT + i] = (uint8_t)(i + 1);
    memcpy(b + AT + 16, (const uint8_t[]){8, 0, 0, 0, 0, 0, 0, 0}, 8);
    memcpy(b + AT + 24, (const uint8_t[]){0, 1, 0, 0, 0, 0, 0, 0}, 8);
    memcpy(b + AT + 32, (const uint8_t[]){7, 0, 0, 0, 0, 0, 0, 1}, 8);
    pos = AT;
    assert_int_equal(baton_wire_decode_peer_write(b, sizeof b, &pos, &w), 0);
    assert_int_equal(pos, AT + 40);
    assert_memory_equal(w.grant, b + AT, 16);
    assert_true(w.offset == 8 && w.n == 256 && w.seq == (1ull << 56) + 7);
    baton_wire_encode_peer_write(enc, &w);
    assert_memory_equal(enc, b + AT, 40);
    for (size_t n = 0; n < 40; n++) {
        pos = AT;
        assert_int_equal(baton_wire_decode_peer_write(b, AT + n, &pos, &w), BATON_E_TRUNCATED);
        assert_int_equal(pos, AT);
    }
    b[AT + 25] = 0; /* n = 0 */
    pos = AT;
    assert_int_equal(baton_wire_decode_peer_write(b, sizeof b, &pos, &w), BATON_E_INVAL);
    assert_int_equal(pos, AT);
    b[AT + 31] = 0x80; /* n = 2^63: in range for the decoder, the grant decides */
    assert_int_equal(baton_wire_decode_peer_write(b, sizeof b, &pos, &w), 0);
    assert_true(w.n == 1ull << 63);
    memset(b + AT + 32, 0, 8); /* seq 0: every write names the write it is */
    pos = AT;
    assert_int_equal(baton_wire_decode_peer_write(b, sizeof b, &pos, &w), BATON_E_INVAL);
    assert_int_equal(pos, AT);
    b[AT + 32] = 1;
    memset(b + AT, 0, 16); /* no grant */
    pos = AT;
    assert_int_equal(baton_wire_decode_peer_write(b, sizeof b, &pos, &w), BATON_E_INVAL);
    assert_int_equal(pos, AT);
}

/* ---- COPY_TENSOR_TO reply ---- */

static void test_copy_result(void **state)
{
    uint8_t b[AT + 48], enc[48];
    struct baton_copy_result r;
    size_t pos;
    (void)state;

    memset(b, 0, sizeof b);
    memset(b, 0xEE, AT);
    b[AT] = 5;               /* REFUSED */
    b[AT + 4] = 23;          /* E_NOT_FOUND */
    b[AT + 8] = 0x48;        /* 328 bytes sent */
    b[AT + 9] = 1;
    b[AT + 16 + 7] = 0x01;   /* 2^56 received */
    b[AT + 24] = 3;
    b[AT + 32] = 4;
    pos = AT;
    assert_int_equal(baton_wire_decode_copy_result(b, sizeof b, &pos, &r), 0);
    assert_int_equal(pos, AT + 48);
    assert_int_equal(r.result, BATON_COPY_REFUSED);
    assert_int_equal(r.status, 23);
    assert_true(r.peer_bytes_sent == 328 && r.peer_bytes_received == 1ull << 56 &&
                r.copies_done == 3 && r.copies_not_done == 4);
    baton_wire_encode_copy_result(enc, &r);
    assert_memory_equal(enc, b + AT, 48);
    for (size_t n = 0; n < 48; n++) {
        pos = AT;
        assert_int_equal(baton_wire_decode_copy_result(b, AT + n, &pos, &r), BATON_E_TRUNCATED);
        assert_int_equal(pos, AT);
    }
    b[AT] = 8; /* QUEUED: an asynchronous copy handed to the sender */
    pos = AT;
    assert_int_equal(baton_wire_decode_copy_result(b, sizeof b, &pos, &r), 0);
    assert_int_equal(r.result, BATON_COPY_QUEUED);
    b[AT] = 9; /* CANCELLED: the latch was set, the destination is told */
    pos = AT;
    assert_int_equal(baton_wire_decode_copy_result(b, sizeof b, &pos, &r), 0);
    assert_int_equal(r.result, BATON_COPY_CANCELLED);
    assert_int_equal(BATON_COPY_OUTCOME_LIMIT, 10);
    b[AT] = BATON_COPY_OUTCOME_LIMIT - 1;
    pos = AT;
    assert_int_equal(baton_wire_decode_copy_result(b, sizeof b, &pos, &r), 0);
    b[AT] = BATON_COPY_OUTCOME_LIMIT;
    pos = AT;
    assert_int_equal(baton_wire_decode_copy_result(b, sizeof b, &pos, &r), BATON_E_INVAL);
    assert_int_equal(pos, AT);
    b[AT] = 0;
    b[AT + 6] = 1; /* status 65536 */
    assert_int_equal(baton_wire_decode_copy_result(b, sizeof b, &pos, &r), BATON_E_INVAL);
    b[AT + 6] = 0;
    b[AT + 5] = 0xFF;
    b[AT + 4] = 0xFF; /* status 65535 */
    assert_int_equal(baton_wire_decode_copy_result(b, sizeof b, &pos, &r), 0);
    for (int i = 40; i < 48; i++) {
        b[AT + i] = 1; /* reserved */
        pos = AT;
        assert_int_equal(baton_wire_decode_copy_result(b, sizeof b, &pos, &r), BATON_E_INVAL);
        assert_int_equal(pos, AT);
        b[AT + i] = 0;
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_grant_request), cmocka_unit_test(test_grant_id),
        cmocka_unit_test(test_peer_dest),     cmocka_unit_test(test_peer_write),
        cmocka_unit_test(test_copy_result),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
