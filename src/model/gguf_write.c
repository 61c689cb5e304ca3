/* GGUF v3 writer (see gguf_write.h). */
#include "model/gguf_write.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "baton/status.h"
#include "core/types.h"
#include "model/gguf.h"
#include "wire/wire.h"

#define ALIGNMENT 32u

struct bytes {
    uint8_t *p;
    size_t len, cap;
};

struct wtensor {
    char *name;
    uint32_t type, n_dims;
    uint64_t ne[4];
    const uint8_t *data; /* owned, or the caller's (baton_gguf_w_tensor_ref) */
    uint8_t *owned;      /* data when the writer frees it; NULL when borrowed */
    uint64_t nbytes;
};

struct baton_gguf_writer {
    struct bytes kv;
    uint64_t n_kv;
    struct wtensor *tensors;
    size_t n_tensors, cap_tensors;
};

static int put(struct bytes *b, const void *p, size_t n)
{
    if (n > b->cap - b->len) {
        size_t cap = b->cap ? b->cap : 4096;
        uint8_t *q;

        while (cap - b->len < n)
            cap *= 2;
        q = realloc(b->p, cap);
        if (q == NULL)
            return BATON_E_NOMEM;
        b->p = q;
        b->cap = cap;
    }
    if (n)
        memcpy(b->p + b->len, p, n);
    b->len += n;
    return 0;
}

static int put_u32(struct bytes *b, uint32_t v)
{
    uint8_t x[4];

    baton_wire_put_u32(x, v);
    return put(b, x, 4);
}

static int put_u64(struct bytes *b, uint64_t v)
{
    uint8_t x[8];

    baton_wire_put_u64(x, v);
    return put(b, x, 8);
}

static int put_str(struct bytes *b, const char *s, size_t len)
{
    int rc = put_u64(b, len);

    return rc ? rc : put(b, s, len);
}

static int begin_kv(struct baton_gguf_writer *w, const char *key, uint32_t type)
{
    int rc;

    if (key == NULL || *key == '\0')
        return BATON_E_INVAL;
    rc = put_str(&w->kv, key, strlen(key));
    if (rc == 0)
        rc = put_u32(&w->kv, type);
    if (rc == 0)
        w->n_kv++;
    return rc;
}

int baton_gguf_writer_create(struct baton_gguf_writer **out)
{
    *out = calloc(1, sizeof(**out));
    return *out ? 0 : BATON_E_NOMEM;
}

void baton_gguf_writer_free(struct baton_gguf_writer *w)
{
    size_t i;

    if (w == NULL)
        return;
    for (i = 0; i < w->n_tensors; i++) {
        free(w->tensors[i].name);
        free(w->tensors[i].owned);
    }
    free(w->tensors);
    free(w->kv.p);
    free(w);
}

int baton_gguf_w_u32(struct baton_gguf_writer *w, const char *key, uint32_t v)
{
    int rc = begin_kv(w, key, BATON_GGUF_U32);

    return rc ? rc : put_u32(&w->kv, v);
}

int baton_gguf_w_f32(struct baton_gguf_writer *w, const char *key, float v)
{
    uint32_t u;
    int rc = begin_kv(w, key, BATON_GGUF_F32);

    memcpy(&u, &v, 4);
    return rc ? rc : put_u32(&w->kv, u);
}

int baton_gguf_w_bool(struct baton_gguf_writer *w, const char *key, int v)
{
    uint8_t b = v ? 1 : 0;
    int rc = begin_kv(w, key, BATON_GGUF_BOOL);

    return rc ? rc : put(&w->kv, &b, 1);
}

int baton_gguf_w_string(struct baton_gguf_writer *w, const char *key, const char *s, size_t len)
{
    int rc = begin_kv(w, key, BATON_GGUF_STRING);

    return rc ? rc : put_str(&w->kv, s, len);
}

int baton_gguf_w_raw(struct baton_gguf_writer *w, const char *key, uint32_t type, const void *raw,
                     size_t len)
{
    int rc = begin_kv(w, key, type);

    return rc ? rc : put(&w->kv, raw, len);
}

static int begin_array(struct baton_gguf_writer *w, const char *key, uint32_t elem, size_t n)
{
    int rc = begin_kv(w, key, BATON_GGUF_ARRAY);

    if (rc == 0)
        rc = put_u32(&w->kv, elem);
    if (rc == 0)
        rc = put_u64(&w->kv, n);
    return rc;
}

int baton_gguf_w_f32_array(struct baton_gguf_writer *w, const char *key, const float *v, size_t n)
{
    int rc = begin_array(w, key, BATON_GGUF_F32, n);
    size_t i;

    for (i = 0; rc == 0 && i < n; i++) {
        uint32_t u;

        memcpy(&u, &v[i], 4);
        rc = put_u32(&w->kv, u);
    }
    return rc;
}

int baton_gguf_w_i32_array(struct baton_gguf_writer *w, const char *key, const int32_t *v, size_t n)
{
    int rc = begin_array(w, key, BATON_GGUF_I32, n);
    size_t i;

    for (i = 0; rc == 0 && i < n; i++)
        rc = put_u32(&w->kv, (uint32_t)v[i]);
    return rc;
}

int baton_gguf_w_str_array(struct baton_gguf_writer *w, const char *key, const char *const *strs,
                           const size_t *lens, size_t n)
{
    int rc = begin_array(w, key, BATON_GGUF_STRING, n);
    size_t i;

    for (i = 0; rc == 0 && i < n; i++)
        rc = put_str(&w->kv, strs[i], lens[i]);
    return rc;
}

/* Appends a tensor's info; its data is the caller's to set. nbytes must be
 * the size that type and ne give. */
static int add_tensor(struct baton_gguf_writer *w, const char *name, uint32_t type,
                      uint32_t n_dims, const uint64_t *ne, uint64_t nbytes, struct wtensor **out)
{
    struct wtensor *t;
    uint64_t full[4] = {1, 1, 1, 1}, nb[4], size;
    uint32_t i;
    int rc;

    if (name == NULL || *name == '\0' || n_dims == 0 || n_dims > 4)
        return BATON_E_INVAL;
    for (i = 0; i < n_dims; i++)
        full[i] = ne[i];
    rc = baton_tensor_contiguous_nb(type, full, nb);
    if (rc != 0)
        return rc;
    size = nb[3] * full[3];
    if (size != nbytes)
        return BATON_E_INVAL;
    if (w->n_tensors == w->cap_tensors) {
        size_t cap = w->cap_tensors ? w->cap_tensors * 2 : 64;
        struct wtensor *q = realloc(w->tensors, cap * sizeof(*q));

        if (q == NULL)
            return BATON_E_NOMEM;
        w->tensors = q;
        w->cap_tensors = cap;
    }
    t = &w->tensors[w->n_tensors];
    memset(t, 0, sizeof(*t));
    t->name = strdup(name);
    if (t->name == NULL)
        return BATON_E_NOMEM;
    t->type = type;
    t->n_dims = n_dims;
    memcpy(t->ne, full, sizeof(full));
    t->nbytes = nbytes;
    *out = t;
    return 0;
}

/* Allocates t's data (nbytes) and makes it the writer's; frees t's name on
 * failure. */
static int own_data(struct wtensor *t)
{
    t->owned = malloc(t->nbytes ? t->nbytes : 1);
    if (t->owned == NULL) {
        free(t->name);
        return BATON_E_NOMEM;
    }
    t->data = t->owned;
    return 0;
}

int baton_gguf_w_tensor(struct baton_gguf_writer *w, const char *name, uint32_t type,
                        uint32_t n_dims, const uint64_t *ne, const void *data, uint64_t nbytes)
{
    struct wtensor *t;
    int rc = add_tensor(w, name, type, n_dims, ne, nbytes, &t);

    if (rc == 0)
        rc = own_data(t);
    if (rc == 0) {
        memcpy(t->owned, data, nbytes);
        w->n_tensors++;
    }
    return rc;
}

int baton_gguf_w_tensor_alloc(struct baton_gguf_writer *w, const char *name, uint32_t type,
                              uint32_t n_dims, const uint64_t *ne, uint64_t nbytes, void **data)
{
    struct wtensor *t;
    int rc = add_tensor(w, name, type, n_dims, ne, nbytes, &t);

    if (rc == 0)
        rc = own_data(t);
    if (rc == 0) {
        *data = t->owned;
        w->n_tensors++;
    }
    return rc;
}

int baton_gguf_w_tensor_ref(struct baton_gguf_writer *w, const char *name, uint32_t type,
                            uint32_t n_dims, const uint64_t *ne, const void *data,
                            uint64_t nbytes)
{
    struct wtensor *t;
    int rc = add_tensor(w, name, type, n_dims, ne, nbytes, &t);

    if (rc == 0) {
        t->data = data;
        w->n_tensors++;
    }
    return rc;
}

static uint64_t pad_to(uint64_t v)
{
    return (v + ALIGNMENT - 1) / ALIGNMENT * ALIGNMENT;
}

static int write_all(int fd, const void *p, size_t n)
{
    const uint8_t *b = p;

    while (n > 0) {
        ssize_t k = write(fd, b, n);

        if (k < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        b += k;
        n -= (size_t)k;
    }
    return 0;
}

/* See gguf_write.h. */
int baton_gguf_tmp_path(const char *path, char *tmp, size_t len)
{
    const int n = snprintf(tmp, len, "%s.tmp.%ld", path, (long)getpid());

    return n < 0 || (size_t)n >= len ? -1 : 0;
}

int baton_gguf_writer_write(struct baton_gguf_writer *w, const char *path, char *err,
                            size_t err_len)
{
    struct bytes head = {0};
    static const uint8_t zeros[ALIGNMENT] = {0};
    char tmp[4096];
    struct stat st;
    uint64_t off = 0;
    size_t i;
    int fd = -1, rc, created = 0;
    uint32_t d;

    rc = put(&head, "GGUF", 4);
    if (rc == 0)
        rc = put_u32(&head, 3);
    if (rc == 0)
        rc = put_u64(&head, w->n_tensors);
    if (rc == 0)
        rc = put_u64(&head, w->n_kv);
    if (rc == 0)
        rc = put(&head, w->kv.p, w->kv.len);
    for (i = 0; rc == 0 && i < w->n_tensors; i++) {
        const struct wtensor *t = &w->tensors[i];

        rc = put_str(&head, t->name, strlen(t->name));
        if (rc == 0)
            rc = put_u32(&head, t->n_dims);
        for (d = 0; rc == 0 && d < t->n_dims; d++)
            rc = put_u64(&head, t->ne[d]);
        if (rc == 0)
            rc = put_u32(&head, t->type);
        if (rc == 0)
            rc = put_u64(&head, off);
        off = pad_to(off + t->nbytes);
    }
    if (rc == 0)
        rc = put(&head, zeros, (size_t)(pad_to(head.len) - head.len));
    if (rc != 0) {
        snprintf(err, err_len, "%s: out of memory", path);
        goto out;
    }
    if (baton_gguf_tmp_path(path, tmp, sizeof(tmp)) != 0) {
        snprintf(err, err_len, "%s: path too long", path);
        rc = BATON_E_INVAL;
        goto out;
    }
    fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    created = fd >= 0;
    if (fd < 0 || write_all(fd, head.p, head.len) != 0) {
        snprintf(err, err_len, "%s: %s", tmp, strerror(errno));
        rc = BATON_E_IO;
        goto out;
    }
    for (i = 0; i < w->n_tensors; i++) {
        const struct wtensor *t = &w->tensors[i];

        if (write_all(fd, t->data, t->nbytes) != 0 ||
            write_all(fd, zeros, (size_t)(pad_to(t->nbytes) - t->nbytes)) != 0) {
            snprintf(err, err_len, "%s: %s", tmp, strerror(errno));
            rc = BATON_E_IO;
            goto out;
        }
    }
    if (fsync(fd) != 0 || close(fd) != 0) {
        fd = -1;
        snprintf(err, err_len, "%s: %s", tmp, strerror(errno));
        rc = BATON_E_IO;
        goto out;
    }
    fd = -1;
    /* rename would replace whatever is at path: never a device, FIFO,
     * socket or directory, nor a link to one (as root, a GGUF once
     * replaced /dev/full, and -o /dev/stdout the /dev/stdout link) */
    if ((lstat(path, &st) == 0 && !S_ISREG(st.st_mode) && !S_ISLNK(st.st_mode)) ||
        (stat(path, &st) == 0 && !S_ISREG(st.st_mode))) {
        snprintf(err, err_len, "%s: not a regular file; the GGUF is written only to a regular "
                               "file or a new one", path);
        rc = BATON_E_IO;
        goto out;
    }
    if (rename(tmp, path) != 0) {
        snprintf(err, err_len, "%s: %s", path, strerror(errno));
        rc = BATON_E_IO;
        goto out;
    }
    rc = 0;
out:
    if (fd >= 0)
        close(fd);
    if (rc != 0 && created)
        unlink(tmp);
    free(head.p);
    return rc;
}
