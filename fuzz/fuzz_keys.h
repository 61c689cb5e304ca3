/* Keys of the keyed harnesses (dispatcher, lobby, client replies): made with
 * the library's generator in a private temporary folder, opened (the only
 * way to a struct baton_key) and the files removed at once. */
#ifndef BATON_FUZZ_KEYS_H
#define BATON_FUZZ_KEYS_H

#include <errno.h>
#include <unistd.h>

#include "fuzz_random.h"

#include "auth/auth.h"

/* Once per process, before anything else of libsodium runs
 * (randombytes_set_implementation must come first): installs the
 * deterministic random source, starts the auth library and makes dir (cap
 * bytes) a new private folder under $TMPDIR or /tmp named after who. Aborts
 * on any failure: the harness cannot run without its keys. */
static inline void fuzz_keys_begin(const char *who, char *dir, size_t cap)
{
    const char *tmp = getenv("TMPDIR");

    if (randombytes_set_implementation(&fuzz_fixed_random) != 0 || baton_auth_init() != 0)
        abort();
    snprintf(dir, cap, "%s/baton-%s-XXXXXX", tmp && *tmp ? tmp : "/tmp", who);
    if (!mkdtemp(dir)) {
        fprintf(stderr, "%s: mkdtemp: %s\n", who, strerror(errno));
        abort();
    }
}

/* A new key named name in dir (fuzz_keys_begin's), opened; its file is
 * removed. Aborts on failure. */
static inline struct baton_key *fuzz_new_key(const char *who, const char *dir, const char *name)
{
    char path[512], err[256];
    struct baton_key *k = NULL;

    snprintf(path, sizeof path, "%s/%s", dir, name);
    if (baton_key_generate_file(path, err, sizeof err) != 0 ||
        baton_key_open(path, &k, err, sizeof err) != 0) {
        fprintf(stderr, "%s: key %s: %s\n", who, path, err);
        abort();
    }
    unlink(path);
    return k;
}

#endif
