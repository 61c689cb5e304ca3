/* `baton keygen -o FILE`: writes a new 32-byte key (libsodium's CSPRNG) to
 * FILE, created with O_EXCL and mode 0600, never overwriting anything
 * (auth/auth.h baton_key_generate_file). The same command makes the client
 * key (batond --key, baton run/bench/info --key) and the peer key (batond
 * --peer-key).
 * Exit 0 on success, 1 when the file cannot be created, 2 on a usage error. */
#include <stdio.h>
#include <string.h>

#include "auth/auth.h"
#include "cli/cli.h"

static void keygen_usage(FILE *f)
{
    fputs("usage: baton keygen -o FILE\n"
          "  writes a new random 32-byte key to FILE (mode 0600; an existing FILE is\n"
          "  never overwritten). Give the client key to batond --key and to\n"
          "  baton run/bench/info --key (or BATON_KEY_FILE); a second key made the same\n"
          "  way is the peer key (batond --peer-key), held only by servers.\n"
          "Exit status: 0 written, 1 FILE cannot be created (it exists, its directory is\n"
          "missing, ...), 2 usage error.\n",
          f);
}

int baton_cmd_keygen(int argc, char **argv)
{
    const char *path = NULL;
    char err[256];
    int rc;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            keygen_usage(stdout);
            return 0;
        } else if ((!strcmp(a, "-o") || !strcmp(a, "--output")) && v && !path) {
            path = v;
            i++;
        } else {
            fprintf(stderr, "baton keygen: %s: %s\n", a,
                    (!strcmp(a, "-o") || !strcmp(a, "--output"))
                        ? (path ? "given twice" : "needs a value")
                        : "unknown argument");
            keygen_usage(stderr);
            return 2;
        }
    }
    if (!path || !*path) {
        fprintf(stderr, "baton keygen: -o FILE is required\n");
        keygen_usage(stderr);
        return 2;
    }
    rc = baton_auth_init();
    if (rc != 0) {
        fprintf(stderr, "baton keygen: no usable random source (libsodium)\n");
        return 1;
    }
    rc = baton_key_generate_file(path, err, sizeof err);
    if (rc != 0) {
        fprintf(stderr, "baton keygen: %s\n", err);
        return 1;
    }
    fprintf(stderr, "baton keygen: wrote a new key to %s (mode 0600)\n", path);
    return 0;
}
