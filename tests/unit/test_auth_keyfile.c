/* Key files: creation (O_EXCL, 0600, 32 bytes) and every refusal of
 * baton_key_load (symlink, type, owner, mode, size). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "auth/auth.h"
#include "baton/status.h"

static char dir[64];

static int setup(void **state)
{
    (void)state;
    if (baton_auth_init() != 0)
        return -1;
    snprintf(dir, sizeof dir, "/tmp/baton_auth_test.XXXXXX");
    return mkdtemp(dir) ? 0 : -1;
}

static int teardown(void **state)
{
    char cmd[128];
    (void)state;
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    return system(cmd) == 0 ? 0 : -1;
}

static void path_of(char *out, size_t len, const char *name)
{
    snprintf(out, len, "%s/%s", dir, name);
}

/* n bytes that look like a key (not one byte repeated, not text: see
 * baton_key_is_weak), a different run for each v. */
static void fill_key(uint8_t *buf, size_t n, uint8_t v)
{
    for (size_t i = 0; i < n; i++)
        buf[i] = (uint8_t)(v + 0x9d * i);
}

/* Writes n bytes of fill_key(v) into a fresh file with the given mode
 * (exactly: chmod after create, so the umask does not matter). */
static void write_file(const char *path, size_t n, uint8_t v, mode_t mode)
{
    uint8_t buf[64];
    assert_true(n <= sizeof buf);
    fill_key(buf, n, v);
    unlink(path);
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0600);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, buf, n), (ssize_t)n);
    assert_int_equal(fchmod(fd, mode), 0);
    close(fd);
}

/* Reads a whole small file with stdio, independently of the library. */
static size_t read_file(const char *path, uint8_t *buf, size_t cap)
{
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    size_t n = fread(buf, 1, cap, f);
    fclose(f);
    return n;
}

/* Expects baton_key_load to refuse path with want_rc, leave the key buffer
 * untouched and name the file and `reason` in the message. */
static void expect_refused(const char *path, int want_rc, const char *reason)
{
    uint8_t key[BATON_KEY_BYTES];
    uint8_t sentinel[BATON_KEY_BYTES];
    char err[512] = "";
    memset(key, 0xA5, sizeof key);
    memset(sentinel, 0xA5, sizeof sentinel);
    assert_int_equal(baton_key_load(path, key, err, sizeof err), want_rc);
    assert_memory_equal(key, sentinel, sizeof key);
    if (strstr(err, path) == NULL || strstr(err, reason) == NULL)
        fail_msg("message '%s' should name '%s' and say '%s'", err, path, reason);
}

static void test_generate_and_load(void **state)
{
    char p1[128], p2[128];
    uint8_t file[64], file2[64], key[BATON_KEY_BYTES];
    struct stat st;
    char err[256];
    (void)state;
    path_of(p1, sizeof p1, "gen1.key");
    path_of(p2, sizeof p2, "gen2.key");
    mode_t old = umask(0); /* the file must still be 0600, not 0666 & ~umask */
    int rc = baton_key_generate_file(p1, err, sizeof err);
    umask(old);
    assert_int_equal(rc, 0);
    assert_int_equal(baton_key_generate_file(p2, err, sizeof err), 0);
    assert_int_equal(lstat(p1, &st), 0);
    assert_true(S_ISREG(st.st_mode));
    assert_int_equal(st.st_mode & 07777, 0600);
    assert_int_equal(st.st_uid, geteuid());
    assert_int_equal(read_file(p1, file, sizeof file), BATON_KEY_BYTES);
    assert_int_equal(read_file(p2, file2, sizeof file2), BATON_KEY_BYTES);
    /* 32 random bytes each: equal keys would mean a broken generator */
    assert_memory_not_equal(file, file2, BATON_KEY_BYTES);
    assert_int_equal(baton_key_load(p1, key, err, sizeof err), 0);
    assert_memory_equal(key, file, BATON_KEY_BYTES);

    struct baton_key *k = NULL;
    assert_int_equal(baton_key_open(p2, &k, err, sizeof err), 0);
    assert_non_null(k);
    assert_memory_equal(baton_key_bytes(k), file2, BATON_KEY_BYTES);
    baton_key_free(k);
    baton_key_free(NULL);
}

static void test_generate_refuses_existing(void **state)
{
    char p[128], link[128], target[128];
    uint8_t before[64], after[64];
    char err[256] = "";
    struct stat st;
    (void)state;
    path_of(p, sizeof p, "exists.key");
    write_file(p, 32, 0x11, 0600);
    assert_int_equal(read_file(p, before, sizeof before), 32);
    assert_int_equal(baton_key_generate_file(p, err, sizeof err), BATON_E_INVAL);
    assert_non_null(strstr(err, "exists"));
    assert_non_null(strstr(err, p));
    assert_int_equal(read_file(p, after, sizeof after), 32);
    assert_memory_equal(before, after, 32);

    /* a dangling symlink: nothing may be created through it */
    path_of(link, sizeof link, "dangling.key");
    path_of(target, sizeof target, "target-not-created");
    assert_int_equal(symlink(target, link), 0);
    assert_int_equal(baton_key_generate_file(link, err, sizeof err), BATON_E_INVAL);
    assert_non_null(strstr(err, "is a symbolic link to nothing"));
    assert_int_equal(lstat(target, &st), -1);
    /* a link to an existing file: named as a link, the file untouched */
    assert_int_equal(unlink(link), 0);
    assert_int_equal(symlink(p, link), 0);
    assert_int_equal(baton_key_generate_file(link, err, sizeof err), BATON_E_INVAL);
    assert_non_null(strstr(err, "is a symbolic link; refusing"));
    assert_int_equal(read_file(p, after, sizeof after), 32);
    assert_memory_equal(before, after, 32);
}

static void test_load_symlink(void **state)
{
    char p[128], link[128];
    (void)state;
    path_of(p, sizeof p, "real.key");
    path_of(link, sizeof link, "link.key");
    write_file(p, 32, 0x22, 0600);
    assert_int_equal(symlink(p, link), 0);
    expect_refused(link, BATON_E_AUTH, "symbolic link");
}

static void test_load_modes(void **state)
{
    char p[128];
    uint8_t key[BATON_KEY_BYTES], want[BATON_KEY_BYTES];
    (void)state;
    path_of(p, sizeof p, "mode.key");
    write_file(p, 32, 0x33, 0640);
    expect_refused(p, BATON_E_AUTH, "mode 0640");
    write_file(p, 32, 0x33, 0604);
    expect_refused(p, BATON_E_AUTH, "mode 0604");
    write_file(p, 32, 0x33, 0610);
    expect_refused(p, BATON_E_AUTH, "mode 0610");
    write_file(p, 32, 0x33, 0601);
    expect_refused(p, BATON_E_AUTH, "mode 0601");
    /* owner-only modes are fine, read-only ones included */
    fill_key(want, sizeof want, 0x33);
    write_file(p, 32, 0x33, 0400);
    assert_int_equal(baton_key_load(p, key, NULL, 0), 0);
    assert_memory_equal(key, want, sizeof key);
    write_file(p, 32, 0x33, 0700);
    assert_int_equal(baton_key_load(p, key, NULL, 0), 0);
}

static void test_load_sizes(void **state)
{
    char p[128];
    uint8_t key[BATON_KEY_BYTES], want[BATON_KEY_BYTES];
    (void)state;
    path_of(p, sizeof p, "size.key");
    write_file(p, 31, 0x44, 0600);
    expect_refused(p, BATON_E_FORMAT, "31 bytes");
    write_file(p, 33, 0x44, 0600);
    expect_refused(p, BATON_E_FORMAT, "33 bytes");
    write_file(p, 0, 0x44, 0600);
    expect_refused(p, BATON_E_FORMAT, "0 bytes");

    /* 32 bytes and a trailing newline: 33 bytes, refused */
    uint8_t nl[33];
    memset(nl, 0x44, 32);
    nl[32] = '\n';
    unlink(p);
    int fd = open(p, O_WRONLY | O_CREAT | O_EXCL, 0600);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, nl, sizeof nl), (ssize_t)sizeof nl);
    close(fd);
    expect_refused(p, BATON_E_FORMAT, "no trailing newline");

    write_file(p, 32, 0x44, 0600);
    fill_key(want, sizeof want, 0x44);
    assert_int_equal(baton_key_load(p, key, NULL, 0), 0);
    assert_memory_equal(key, want, sizeof key);
}

/* Writes the 32 bytes of data into a fresh 0600 file. */
static void write_bytes(const char *path, const void *data)
{
    unlink(path);
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0600);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, data, BATON_KEY_BYTES), (ssize_t)BATON_KEY_BYTES);
    close(fd);
}

/* 32 bytes that cannot be a random key are refused: one byte repeated,
 * text (a passphrase, its newline too); one byte off either rule is a key */
static void test_load_weak(void **state)
{
    char p[128];
    uint8_t b[BATON_KEY_BYTES], key[BATON_KEY_BYTES];
    (void)state;
    path_of(p, sizeof p, "weak.key");
    memset(b, 0, sizeof b);
    write_bytes(p, b);
    expect_refused(p, BATON_E_FORMAT, "one byte repeated 32 times, not a random key (make one "
                                      "with 'baton keygen')");
    memset(b, 0xff, sizeof b);
    write_bytes(p, b);
    expect_refused(p, BATON_E_FORMAT, "one byte repeated");
    memcpy(b, "correct horse battery staple 32b", 32);
    write_bytes(p, b);
    expect_refused(p, BATON_E_FORMAT, "32 bytes of text (a passphrase?), not a random key");
    memcpy(b, "a 31-byte passphrase\tand\r more!\n", 32);
    write_bytes(p, b);
    expect_refused(p, BATON_E_FORMAT, "32 bytes of text");
    assert_int_equal(baton_key_is_weak(b), 1);
    /* one byte outside text: a key */
    b[5] = 0x80;
    assert_int_equal(baton_key_is_weak(b), 0);
    write_bytes(p, b);
    assert_int_equal(baton_key_load(p, key, NULL, 0), 0);
    assert_memory_equal(key, b, sizeof key);
    /* one byte repeated 31 times and another: a key */
    memset(b, 0, sizeof b);
    b[31] = 1;
    assert_int_equal(baton_key_is_weak(b), 0);
    memset(b, 'x', sizeof b);
    assert_int_equal(baton_key_is_weak(b), 1);
    /* the pure parser words it the same and leaves the key alone */
    char err[256];
    memset(key, 0xa5, sizeof key);
    assert_int_equal(baton_key_parse("k", b, sizeof b, key, err, sizeof err), BATON_E_FORMAT);
    assert_string_equal(err, "k: one byte repeated 32 times, not a random key (make one with "
                             "'baton keygen')");
    for (size_t i = 0; i < sizeof key; i++)
        assert_int_equal(key[i], 0xa5);
}

static void test_load_not_regular(void **state)
{
    char d[128], fifo[128];
    (void)state;
    path_of(d, sizeof d, "a-directory");
    assert_int_equal(mkdir(d, 0700), 0);
    expect_refused(d, BATON_E_AUTH, "not a regular file");
    /* O_NONBLOCK: opening a FIFO with no writer must not hang */
    path_of(fifo, sizeof fifo, "a-fifo");
    assert_int_equal(mkfifo(fifo, 0600), 0);
    expect_refused(fifo, BATON_E_AUTH, "not a regular file");
}

static void test_load_missing(void **state)
{
    char p[128];
    (void)state;
    path_of(p, sizeof p, "missing.key");
    expect_refused(p, BATON_E_NOT_FOUND, "no such key file");
}

static void test_load_not_owned(void **state)
{
    char p[128];
    (void)state;
    if (geteuid() != 0) {
        /* only root can give a file away; the check is the same comparison */
        skip();
    }
    path_of(p, sizeof p, "nobody.key");
    write_file(p, 32, 0x55, 0600);
    assert_int_equal(chown(p, 65534, 65534), 0);
    expect_refused(p, BATON_E_AUTH, "owned by uid 65534");
}

/* A systemd credential (baton_key_open_credential): read-only, owner and
 * group read allowed (an ACL for the service's user shows as 0440), nothing
 * writable, nothing for others; the plain key rules refuse 0440. */
static void test_credential_modes(void **state)
{
    static const mode_t accepted[] = {0400, 0440};
    static const mode_t refused[] = {0600, 0640, 0444, 0404, 0460, 0500, 0420};
    char p[128], err[256];
    struct baton_key *k = NULL;
    uint8_t want[BATON_KEY_BYTES];
    (void)state;
    path_of(p, sizeof p, "cred.key");
    fill_key(want, sizeof want, 0x66);
    for (size_t i = 0; i < sizeof accepted / sizeof accepted[0]; i++) {
        write_file(p, 32, 0x66, accepted[i]);
        assert_int_equal(baton_key_open_credential(p, &k, err, sizeof err), 0);
        assert_memory_equal(baton_key_bytes(k), want, sizeof want);
        baton_key_free(k);
        k = NULL;
    }
    write_file(p, 32, 0x66, 0440);
    assert_int_equal(baton_key_open(p, &k, err, sizeof err), BATON_E_AUTH);
    assert_null(k);
    for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) {
        write_file(p, 32, 0x66, refused[i]);
        assert_int_equal(baton_key_open_credential(p, &k, err, sizeof err), BATON_E_AUTH);
        assert_null(k);
        assert_non_null(strstr(err, "a credential must be read-only"));
    }
    /* the size and symlink rules still hold */
    write_file(p, 33, 0x66, 0400);
    assert_int_equal(baton_key_open_credential(p, &k, err, sizeof err), BATON_E_FORMAT);
    if (geteuid() == 0) {
        /* owned by neither the user nor root */
        write_file(p, 32, 0x66, 0400);
        assert_int_equal(chown(p, 65534, 65534), 0);
        assert_int_equal(baton_key_open_credential(p, &k, err, sizeof err), BATON_E_AUTH);
        assert_non_null(strstr(err, "owned by uid 65534"));
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_generate_and_load),
        cmocka_unit_test(test_generate_refuses_existing),
        cmocka_unit_test(test_load_symlink),
        cmocka_unit_test(test_load_modes),
        cmocka_unit_test(test_load_sizes),
        cmocka_unit_test(test_load_weak),
        cmocka_unit_test(test_load_not_regular),
        cmocka_unit_test(test_load_missing),
        cmocka_unit_test(test_load_not_owned),
        cmocka_unit_test(test_credential_modes),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
