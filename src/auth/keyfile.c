/* Key files (auth.h): creation with O_EXCL and mode 0600, loading with the
 * ownership, mode, type and size checks of DESIGN.md "Security model". */
#include "auth/auth.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "baton/status.h"

struct baton_key {
    uint8_t bytes[BATON_KEY_BYTES];
};

static void set_err(char *err, size_t err_len, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void set_err(char *err, size_t err_len, const char *fmt, ...)
{
    if (err == NULL || err_len == 0)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, err_len, fmt, ap);
    va_end(ap);
}

int baton_auth_init(void)
{
    if (sodium_init() < 0)
        return BATON_E_IO;
    return baton_frame_crypto_init();
}

/* Writes all n bytes, retrying on EINTR and short writes. */
static int write_all(int fd, const uint8_t *p, size_t n)
{
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

int baton_key_generate_file(const char *path, char *err, size_t err_len)
{
    uint8_t key[BATON_KEY_BYTES];
    int rc = 0;
    if (path == NULL || path[0] == '\0') {
        set_err(err, err_len, "key file: no path given");
        return BATON_E_INVAL;
    }
    if (baton_auth_init() != 0) {
        set_err(err, err_len, "%s: no random source", path);
        return BATON_E_IO;
    }
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0) {
        int e = errno;
        struct stat st;
        if (e == EEXIST && lstat(path, &st) == 0 && S_ISLNK(st.st_mode)) {
            /* O_EXCL refuses a link even when it points nowhere */
            set_err(err, err_len, "%s: is a symbolic link%s; refusing to write a key file "
                    "through it", path, stat(path, &st) != 0 ? " to nothing" : "");
            return BATON_E_INVAL;
        }
        if (e == EEXIST && stat(path, &st) == 0 && S_ISDIR(st.st_mode)) {
            set_err(err, err_len, "%s: is a directory; give the key file's path", path);
            return BATON_E_INVAL;
        }
        if (e == EEXIST) {
            set_err(err, err_len, "%s: exists; refusing to overwrite it with a key", path);
            return BATON_E_INVAL;
        }
        set_err(err, err_len, "%s: cannot create: %s", path, strerror(e));
        return BATON_E_IO;
    }
    /* open's mode is filtered by the umask; a key file is exactly 0600 */
    if (fchmod(fd, 0600) != 0) {
        set_err(err, err_len, "%s: cannot set mode 0600: %s", path, strerror(errno));
        rc = BATON_E_IO;
        goto out;
    }
    do /* a weak-looking draw: about 1 in 10^13 */
        randombytes_buf(key, sizeof key);
    while (baton_key_is_weak(key));
    if (write_all(fd, key, sizeof key) != 0) {
        set_err(err, err_len, "%s: write failed: %s", path, strerror(errno));
        rc = BATON_E_IO;
        goto out;
    }
    if (fsync(fd) != 0) {
        set_err(err, err_len, "%s: fsync failed: %s", path, strerror(errno));
        rc = BATON_E_IO;
        goto out;
    }
out:
    sodium_memzero(key, sizeof key);
    if (close(fd) != 0 && rc == 0) {
        set_err(err, err_len, "%s: close failed: %s", path, strerror(errno));
        rc = BATON_E_IO;
    }
    /* we created it (O_EXCL): a half-written key file must not remain */
    if (rc != 0)
        unlink(path);
    return rc;
}

/* Reads up to n bytes; returns the count read (short only at EOF) or -1. */
static ssize_t read_full(int fd, uint8_t *p, size_t n)
{
    size_t got = 0;
    while (got < n) {
        ssize_t r = read(fd, p + got, n - got);
        if (r < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        if (r == 0)
            break;
        got += (size_t)r;
    }
    return (ssize_t)got;
}

int baton_key_check_file(const char *path, const struct baton_key_file_info *info,
                         int credential, char *err, size_t err_len)
{
    if (!info->is_regular) {
        set_err(err, err_len, "%s: not a regular file", path);
        return BATON_E_AUTH;
    }
    if (info->uid != info->euid && !(credential && info->uid == 0)) {
        set_err(err, err_len, "%s: owned by uid %u, not by the current user (uid %u)", path,
                (unsigned)info->uid, (unsigned)info->euid);
        return BATON_E_AUTH;
    }
    if (credential && (info->mode & 0337) != 0) {
        set_err(err, err_len,
                "%s: mode %04o: a credential must be read-only, with no access for others "
                "(chmod 400 %s; systemd's LoadCredential= gives 0400)",
                path, (unsigned)(info->mode & 07777), path);
        return BATON_E_AUTH;
    }
    if (!credential && (info->mode & 077) != 0) {
        set_err(err, err_len,
                "%s: mode %04o gives group or other access; a key file must be its "
                "owner's alone, 0600 or 0400 (chmod 600 %s)",
                path, (unsigned)(info->mode & 07777), path);
        return BATON_E_AUTH;
    }
    if (info->size != (int64_t)BATON_KEY_BYTES) {
        set_err(err, err_len,
                "%s: %lld bytes; a key file is exactly %u raw bytes (no trailing newline; "
                "make one with 'baton keygen')",
                path, (long long)info->size, BATON_KEY_BYTES);
        return BATON_E_FORMAT;
    }
    return 0;
}

/* baton_key_is_weak's rules: 1 one byte repeated, 2 all text (printable
 * ASCII, TAB, LF, CR), 0 neither. */
static int weak_kind(const uint8_t key[BATON_KEY_BYTES])
{
    int same = 1, text = 1;

    for (size_t i = 0; i < BATON_KEY_BYTES; i++) {
        same &= key[i] == key[0];
        text &= (key[i] >= 0x20 && key[i] <= 0x7e) || key[i] == '\t' || key[i] == '\n' ||
                key[i] == '\r';
    }
    return same ? 1 : text ? 2 : 0;
}

int baton_key_parse(const char *path, const uint8_t *data, size_t n,
                    uint8_t key[BATON_KEY_BYTES], char *err, size_t err_len)
{
    if (n != BATON_KEY_BYTES) {
        set_err(err, err_len,
                "%s: %zu bytes; a key file is exactly %u raw bytes (no trailing newline; "
                "make one with 'baton keygen')",
                path, n, BATON_KEY_BYTES);
        return BATON_E_FORMAT;
    }
    const int weak = weak_kind(data);

    if (weak != 0) {
        set_err(err, err_len, "%s: %s, not a random key (make one with 'baton keygen')", path,
                weak == 1 ? "one byte repeated 32 times" : "32 bytes of text (a passphrase?)");
        return BATON_E_FORMAT;
    }
    memcpy(key, data, BATON_KEY_BYTES);
    return 0;
}

int baton_key_is_weak(const uint8_t key[BATON_KEY_BYTES])
{
    return weak_kind(key) != 0;
}

/* baton_key_load, and with credential set the owner and mode rules of
 * baton_key_open_credential: opens and reads the file, and leaves every
 * decision to baton_key_check_file and baton_key_parse. */
static int key_load(const char *path, uint8_t key[BATON_KEY_BYTES], int credential, char *err,
                    size_t err_len)
{
    uint8_t buf[BATON_KEY_BYTES + 1];
    struct stat st;
    struct baton_key_file_info info;
    int rc = 0;
    if (path == NULL || path[0] == '\0' || key == NULL) {
        set_err(err, err_len, "key file: no path given");
        return BATON_E_INVAL;
    }
    int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
    if (fd < 0) {
        int e = errno;
        struct stat lst;
        if (e == ELOOP && lstat(path, &lst) == 0 && S_ISLNK(lst.st_mode)) {
            set_err(err, err_len, "%s: is a symbolic link; a key file must be the file itself",
                    path);
            return BATON_E_AUTH;
        }
        if (e == ENOENT) {
            set_err(err, err_len, "%s: no such key file", path);
            return BATON_E_NOT_FOUND;
        }
        set_err(err, err_len, "%s: cannot open key file: %s", path, strerror(e));
        return BATON_E_IO;
    }
    if (fstat(fd, &st) != 0) {
        set_err(err, err_len, "%s: cannot stat key file: %s", path, strerror(errno));
        rc = BATON_E_IO;
        goto out;
    }
    info.is_regular = S_ISREG(st.st_mode);
    info.uid = (uint32_t)st.st_uid;
    info.euid = (uint32_t)geteuid();
    info.mode = (uint32_t)(st.st_mode & 07777);
    info.size = (int64_t)st.st_size;
    rc = baton_key_check_file(path, &info, credential, err, err_len);
    if (rc != 0)
        goto out;
    /* one byte more than a key: a file that grew after fstat is refused too */
    ssize_t got = read_full(fd, buf, sizeof buf);
    if (got < 0) {
        set_err(err, err_len, "%s: read failed: %s", path, strerror(errno));
        rc = BATON_E_IO;
        goto out;
    }
    if ((int64_t)got != info.size) {
        set_err(err, err_len, "%s: changed size while being read", path);
        rc = BATON_E_FORMAT;
        goto out;
    }
    rc = baton_key_parse(path, buf, (size_t)got, key, err, err_len);
out:
    sodium_memzero(buf, sizeof buf);
    close(fd);
    return rc;
}

int baton_key_load(const char *path, uint8_t key[BATON_KEY_BYTES], char *err, size_t err_len)
{
    return key_load(path, key, 0, err, err_len);
}

static int key_open(const char *path, int credential, struct baton_key **out, char *err,
                    size_t err_len)
{
    *out = NULL;
    if (baton_auth_init() != 0) {
        set_err(err, err_len, "%s: libsodium initialisation failed", path ? path : "key file");
        return BATON_E_IO;
    }
    struct baton_key *k = sodium_malloc(sizeof *k);
    if (k == NULL) {
        set_err(err, err_len, "%s: out of memory for the key", path ? path : "key file");
        return BATON_E_NOMEM;
    }
    int rc = key_load(path, k->bytes, credential, err, err_len);
    if (rc != 0) {
        sodium_free(k);
        return rc;
    }
    sodium_mprotect_readonly(k);
    *out = k;
    return 0;
}

int baton_key_open(const char *path, struct baton_key **out, char *err, size_t err_len)
{
    return key_open(path, 0, out, err, err_len);
}

int baton_key_open_credential(const char *path, struct baton_key **out, char *err,
                              size_t err_len)
{
    return key_open(path, 1, out, err, err_len);
}

const uint8_t *baton_key_bytes(const struct baton_key *k)
{
    return k->bytes;
}

void baton_key_free(struct baton_key *k)
{
    if (k == NULL)
        return;
    /* sodium_free makes the region writable, wipes and unmaps it */
    sodium_free(k);
}
