/* Fuzz target keyfile: the key-file loader of src/auth/keyfile.c.
 *
 * Input:
 *   byte 0      bit 0: credential rules (baton_key_open_credential);
 *               bits 1-2: the file's owner as baton_key_check_file sees it
 *               (the effective uid, root, another uid, or bytes 3-6);
 *               bit 3: not a regular file; bits 4-5: the error buffer
 *               (NULL, 1 byte, 24 bytes, 512 bytes);
 *               bit 6: also the real loader on a real file (below),
 *               bit 7: with it, the file is a symbolic link (bit 3: a
 *               directory, bits 3 and 7: a FIFO) instead
 *   bytes 1-2   the mode, little-endian, & 07777
 *   bytes 3-6   the uid when bits 1-2 are 3
 *   the rest    the file's bytes
 *
 * Pure part, every input: baton_key_check_file on the info the header
 * gives (size = the content's length) and baton_key_parse on the content.
 * Oracle, written from auth.h: the rules in their order (not regular,
 * owner: the effective uid or, for a credential, root; mode: no group or
 * other bit, a credential no write, execute or other bit, mode & 0337;
 * size exactly 32) with their codes (AUTH, AUTH, AUTH, FORMAT); parse
 * succeeds exactly for 32 bytes that are neither one byte repeated nor all
 * text (a weak key: FORMAT, "not a random key"), then the key is
 * the bytes, else FORMAT and the key untouched. The message is one line beginning "PATH: ",
 * never longer than the buffer (an exact-size heap block) and
 * NUL-terminated; the same call twice agrees.
 *
 * Real part (bit 6): the content is written to a file in a private
 * temporary directory with the mode (& 0777), or that path is made a
 * symbolic link to such a file, a directory or a FIFO; baton_key_load (or
 * baton_key_open / baton_key_open_credential) must give what the oracle
 * gives for the file's real fstat (a symbolic link: AUTH before any other
 * rule; a weak key that passes them: FORMAT), the key bytes equal to the content on success and untouched on
 * failure. Then baton_key_generate_file on that path must refuse whatever
 * is there (E_INVAL, the file or the link's target unchanged; a link whose
 * target is then removed: still refused, nothing created through it), and
 * on a new path in the directory write 32 bytes with mode 0600.
 */
#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fuzz_common.h"

#include "auth/auth.h"
#include "baton/status.h"

#define KF_PATH_MAX 512

static char dir_path[KF_PATH_MAX - 16];
static char file_path[KF_PATH_MAX];
static char target_path[KF_PATH_MAX];

static void remove_dir(void)
{
    unlink(file_path);
    rmdir(file_path);
    unlink(target_path);
    rmdir(dir_path);
}

static void setup(void)
{
    static int done;
    if (done)
        return;
    done = 1;
    const char *tmp = getenv("TMPDIR");
    snprintf(dir_path, sizeof dir_path, "%s/baton-fuzz-keyfile-XXXXXX",
             tmp && tmp[0] == '/' ? tmp : "/tmp");
    FUZZ_CHECK(mkdtemp(dir_path) != NULL, "mkdtemp: %s", strerror(errno));
    snprintf(file_path, sizeof file_path, "%s/key", dir_path);
    snprintf(target_path, sizeof target_path, "%s/target", dir_path);
    atexit(remove_dir);
    FUZZ_CHECK(baton_auth_init() == 0, "libsodium");
}

/* The content rule, written from auth.h: 32 bytes that are one byte
 * repeated or all text (0x20..0x7e, TAB, LF, CR) are no key. */
static int oracle_weak(const uint8_t *c, size_t n)
{
    int same = 1, text = 1;

    for (size_t i = 0; i < n; i++) {
        same &= c[i] == c[0];
        text &= (c[i] >= 0x20 && c[i] <= 0x7e) || c[i] == 9 || c[i] == 10 || c[i] == 13;
    }
    return n == BATON_KEY_BYTES && (same || text);
}

/* auth.h's rules, written independently. */
static int oracle_check(const struct baton_key_file_info *in, int credential)
{
    if (!in->is_regular)
        return BATON_E_AUTH;
    if (in->uid != in->euid && !(credential && in->uid == 0))
        return BATON_E_AUTH;
    if (credential ? (in->mode & 0337) != 0 : (in->mode & 077) != 0)
        return BATON_E_AUTH;
    if (in->size != 32)
        return BATON_E_FORMAT;
    return 0;
}

/* A message in an exact-size block: NUL inside it, one line, "PATH: ...". */
static void check_message(const char *err, size_t err_len, const char *path, int rc)
{
    if (err == NULL || err_len == 0 || rc == 0)
        return;
    FUZZ_CHECK(memchr(err, '\0', err_len) != NULL, "message not terminated");
    FUZZ_CHECK(strchr(err, '\n') == NULL, "message of more than one line: %s", err);
    size_t pl = strlen(path);
    size_t want = pl + 2 < err_len - 1 ? pl + 2 : err_len - 1;
    char full[KF_PATH_MAX + 4];
    snprintf(full, sizeof full, "%s: ", path);
    FUZZ_CHECK(strncmp(err, full, want) == 0, "message does not begin with the path: %s", err);
}

static void pure_part(const uint8_t *hdr, const uint8_t *content, size_t n, size_t err_len)
{
    const int credential = hdr[0] & 1;
    struct baton_key_file_info in = {
        .is_regular = (hdr[0] & 8) == 0,
        .euid = (uint32_t)geteuid(),
        .mode = (uint32_t)fuzz_le(hdr + 1, 2) & 07777,
        .size = (int64_t)n,
    };
    switch ((hdr[0] >> 1) & 3) {
    case 0: in.uid = in.euid; break;
    case 1: in.uid = 0; break;
    case 2: in.uid = in.euid + 1; break;
    default: in.uid = (uint32_t)fuzz_le(hdr + 3, 4); break;
    }
    const char *path = "fuzz/key";
    char *err = err_len ? malloc(err_len) : NULL;
    FUZZ_CHECK(err_len == 0 || err != NULL, "malloc");

    int want = oracle_check(&in, credential);
    int rc = baton_key_check_file(path, &in, credential, err, err_len);
    FUZZ_CHECK(rc == want, "check_file %d, oracle %d (uid %u euid %u mode %o size %lld cred %d)",
               rc, want, in.uid, in.euid, in.mode, (long long)in.size, credential);
    check_message(err, err_len, path, rc);
    FUZZ_CHECK(baton_key_check_file(path, &in, credential, NULL, 0) == rc, "not repeatable");

    uint8_t key[BATON_KEY_BYTES];
    memset(key, 0xa5, sizeof key);
    rc = baton_key_parse(path, content, n, key, err, err_len);
    if (oracle_weak(content, n)) {
        FUZZ_CHECK(rc == BATON_E_FORMAT, "a weak key accepted: %d", rc);
        for (size_t i = 0; i < sizeof key; i++)
            FUZZ_CHECK(key[i] == 0xa5, "key written on failure");
        check_message(err, err_len, path, rc);
        FUZZ_CHECK(err_len < 256 || strstr(err, "not a random key") != NULL,
                   "message does not say why: %s", err);
    } else if (n == BATON_KEY_BYTES) {
        FUZZ_CHECK(rc == 0, "32 bytes refused: %d", rc);
        FUZZ_CHECK(memcmp(key, content, BATON_KEY_BYTES) == 0, "key differs from its bytes");
    } else {
        FUZZ_CHECK(rc == BATON_E_FORMAT, "%zu bytes: %d, want E_FORMAT", n, rc);
        for (size_t i = 0; i < sizeof key; i++)
            FUZZ_CHECK(key[i] == 0xa5, "key written on failure");
        check_message(err, err_len, path, rc);
        if (err_len >= 256) {
            char count[32];
            snprintf(count, sizeof count, ": %zu bytes;", n);
            FUZZ_CHECK(strstr(err, count) != NULL, "message does not give the size: %s", err);
        }
    }
    free(err);
}

static void write_file(const char *path, const uint8_t *content, size_t n, mode_t mode)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    FUZZ_CHECK(fd >= 0, "create %s: %s", path, strerror(errno));
    size_t at = 0;
    while (at < n) {
        ssize_t w = write(fd, content + at, n - at);
        FUZZ_CHECK(w > 0, "write: %s", strerror(errno));
        at += (size_t)w;
    }
    FUZZ_CHECK(fchmod(fd, mode) == 0, "fchmod: %s", strerror(errno));
    close(fd);
}

/* baton_key_generate_file onto what real_part made at file_path, then onto
 * a new path (the oracle: O_EXCL refuses anything in the way). */
static void generate_part(int link, int other, const uint8_t *content, size_t n, char *err,
                          size_t err_len)
{
    char fresh[KF_PATH_MAX + 8];
    struct stat st;
    int rc = baton_key_generate_file(file_path, err, err_len);

    FUZZ_CHECK(rc == BATON_E_INVAL, "generate over an existing path: %d", rc);
    check_message(err, err_len, file_path, rc);
    if (!other) { /* the file (or the link's target) keeps its bytes, where its
                     mode lets us read them back */
        uint8_t back[64];
        int fd = open(link ? target_path : file_path, O_RDONLY | O_CLOEXEC);

        if (fd >= 0) {
            ssize_t got = read(fd, back, sizeof back);

            close(fd);
            FUZZ_CHECK(got == (ssize_t)(n < sizeof back ? n : sizeof back) &&
                           memcmp(back, content, (size_t)got) == 0,
                       "generate changed the file in the way");
        }
    }
    if (link && !other) { /* the link, dangling now */
        unlink(target_path);
        rc = baton_key_generate_file(file_path, err, err_len);
        FUZZ_CHECK(rc == BATON_E_INVAL, "generate through a dangling link: %d", rc);
        check_message(err, err_len, file_path, rc);
        FUZZ_CHECK(lstat(target_path, &st) != 0, "generate created the link's target");
    }
    snprintf(fresh, sizeof fresh, "%s/new.key", dir_path);
    unlink(fresh);
    rc = baton_key_generate_file(fresh, err, err_len);
    FUZZ_CHECK(rc == 0, "generate on a new path: %d", rc);
    FUZZ_CHECK(stat(fresh, &st) == 0 && st.st_size == BATON_KEY_BYTES &&
                   (st.st_mode & 07777) == 0600,
               "generated file: size or mode");
    unlink(fresh);
}

static void real_part(const uint8_t *hdr, const uint8_t *content, size_t n, size_t err_len)
{
    const int credential = hdr[0] & 1;
    const int link = (hdr[0] & 0x80) != 0, other = (hdr[0] & 8) != 0;
    const mode_t mode = (mode_t)(fuzz_le(hdr + 1, 2) & 0777);
    int want;

    remove_dir(); /* the previous input's files; the directory stays */
    FUZZ_CHECK(mkdir(dir_path, 0700) == 0 || errno == EEXIST, "mkdir: %s", strerror(errno));
    if (link && other) {
        FUZZ_CHECK(mkfifo(file_path, mode) == 0, "mkfifo: %s", strerror(errno));
        want = BATON_E_AUTH;
    } else if (other) {
        FUZZ_CHECK(mkdir(file_path, mode | 0700) == 0, "mkdir: %s", strerror(errno));
        want = BATON_E_AUTH;
    } else if (link) {
        write_file(target_path, content, n, mode);
        FUZZ_CHECK(symlink(target_path, file_path) == 0, "symlink: %s", strerror(errno));
        want = BATON_E_AUTH;
    } else {
        write_file(file_path, content, n, mode);
        struct stat st;
        FUZZ_CHECK(stat(file_path, &st) == 0, "stat: %s", strerror(errno));
        struct baton_key_file_info in = {.is_regular = S_ISREG(st.st_mode),
                                         .uid = (uint32_t)st.st_uid,
                                         .euid = (uint32_t)geteuid(),
                                         .mode = (uint32_t)(st.st_mode & 07777),
                                         .size = (int64_t)st.st_size};
        want = oracle_check(&in, credential);
        if (want == 0 && oracle_weak(content, n))
            want = BATON_E_FORMAT;
    }
    char *err = err_len ? malloc(err_len) : NULL;
    FUZZ_CHECK(err_len == 0 || err != NULL, "malloc");
    int rc;
    if (credential) {
        struct baton_key *k = (struct baton_key *)&rc; /* must become NULL on failure */
        rc = baton_key_open_credential(file_path, &k, err, err_len);
        FUZZ_CHECK(rc == want, "open_credential %d, oracle %d", rc, want);
        FUZZ_CHECK((rc == 0) == (k != NULL), "key pointer and result disagree");
        if (k != NULL)
            FUZZ_CHECK(memcmp(baton_key_bytes(k), content, BATON_KEY_BYTES) == 0, "key bytes");
        baton_key_free(k);
    } else {
        uint8_t key[BATON_KEY_BYTES];
        memset(key, 0x5a, sizeof key);
        rc = baton_key_load(file_path, key, err, err_len);
        FUZZ_CHECK(rc == want, "load %d, oracle %d (mode %o, %zu bytes)", rc, want,
                   (unsigned)mode, n);
        if (rc == 0) {
            FUZZ_CHECK(memcmp(key, content, BATON_KEY_BYTES) == 0, "key bytes");
        } else {
            for (size_t i = 0; i < sizeof key; i++)
                FUZZ_CHECK(key[i] == 0x5a, "key written on failure");
        }
    }
    check_message(err, err_len, file_path, rc);
    generate_part(link, other, content, n, err, err_len);
    free(err);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const size_t err_lens[4] = {0, 1, 24, 512};
    uint8_t hdr[7] = {0};
    setup();
    memcpy(hdr, data, size < sizeof hdr ? size : sizeof hdr);
    size_t n = size > sizeof hdr ? size - sizeof hdr : 0;
    uint8_t *content = fuzz_dup(size > sizeof hdr ? data + sizeof hdr : data, n);
    size_t err_len = err_lens[(hdr[0] >> 4) & 3];

    pure_part(hdr, content, n, err_len);
    if (hdr[0] & 0x40)
        real_part(hdr, content, n, err_len);
    free(content);
    return 0;
}
