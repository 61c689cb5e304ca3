/* `baton keygen -o FILE`: writes a new 32-byte key (libsodium's CSPRNG) to
 * FILE, created with O_EXCL and mode 0600, never overwriting anything
 * (auth/auth.h baton_key_generate_file). The same command makes the client
 * key (batond --key, baton run/bench/info --key) and the peer key (batond
 * --peer-key). With --force an existing FILE is replaced: the key goes to a
 * new file beside it (FILE.tmp.PID, O_EXCL, 0600) that is then renamed onto
 * FILE, so FILE is never half written and a reader sees the old key or the
 * new one.
 * Exit 0 on success, 1 when the file cannot be created, 2 on a usage error. */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "auth/auth.h"
#include "cli/cli.h"

static void keygen_usage(FILE *f)
{
    fputs("usage: baton keygen -o FILE [--force]      (-o FILE or --output FILE)\n"
          "  writes a new random 32-byte key to FILE (mode 0600; an existing FILE is\n"
          "  never overwritten unless --force: then it is replaced at once, by a\n"
          "  rename, with the new key). Give the client key to batond --key and to\n"
          "  baton run/bench/info --key (or BATON_KEY_FILE); a second key made the same\n"
          "  way is the peer key (batond --peer-key), held only by servers.\n"
          "  -h, --help  this text\n"
          "Exit status: 0 written, 1 FILE cannot be created (it exists, its directory is\n"
          "missing, ...), 2 usage error.\n",
          f);
}

int baton_cmd_keygen(int argc, char **argv)
{
    const char *path = NULL;
    char err[256], tmp[4096];
    int rc, force = 0, c;
    enum { O_FORCE = 256 };
    static const struct option opts[] = {{"output", required_argument, 0, 'o'},
                                         {"force", no_argument, 0, O_FORCE},
                                         {"help", no_argument, 0, 'h'},
                                         {0, 0, 0, 0}};

    optind = 1;
    while ((c = getopt_long(argc, argv, "o:h", opts, NULL)) != -1) {
        switch (c) {
        case 'h': keygen_usage(stdout); return 0;
        case O_FORCE: force = 1; break;
        case 'o':
            if (strcmp(optarg, "-") == 0) { /* '-' is stdin/stdout elsewhere */
                fputs("baton keygen: -o -: a key goes to a file of its own (mode 0600), not "
                      "to standard output; give a path (./- for a file named '-')\n",
                      stderr);
                return 2;
            }
            if (path != NULL) {
                fputs("baton keygen: -o/--output given twice (one key file a run)\n"
                      "(see `baton keygen --help`)\n",
                      stderr);
                return 2;
            }
            path = optarg;
            break;
        default: /* getopt said which option */
            fputs("(see `baton keygen --help`)\n", stderr);
            return 2;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "baton keygen: %s: unknown argument (the file goes after -o)\n"
                        "(see `baton keygen --help`)\n",
                argv[optind]);
        return 2;
    }
    if (!path || !*path) {
        fputs("baton keygen: -o FILE is required\n(see `baton keygen --help`)\n", stderr);
        return 2;
    }
    rc = baton_auth_init();
    if (rc != 0) {
        fprintf(stderr, "baton keygen: no usable random source (libsodium)\n");
        return 1;
    }
    struct stat st;
    /* lstat, not access(): a symbolic link (even a dangling one) is
     * replaced itself, its target left alone */
    /* --force replaces a file, never a device, FIFO or socket (as root,
     * --force -o /dev/full removed /dev/full), nor a link to one */
    if (force && ((lstat(path, &st) == 0 && !S_ISREG(st.st_mode) && !S_ISLNK(st.st_mode) &&
                   !S_ISDIR(st.st_mode)) ||
                  (stat(path, &st) == 0 && !S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode)))) {
        fprintf(stderr, "baton keygen: %s: not a regular file; --force replaces only a key "
                        "file\n", path);
        return 1;
    }
    if (force && lstat(path, &st) == 0) {
        if (snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid()) >= (int)sizeof tmp) {
            fprintf(stderr, "baton keygen: %s: path too long\n", path);
            return 1;
        }
        rc = baton_key_generate_file(tmp, err, sizeof err);
        if (rc != 0) {
            fprintf(stderr, "baton keygen: %s\n", err);
            return 1;
        }
        if (rename(tmp, path) != 0) {
            fprintf(stderr, "baton keygen: %s: cannot replace it: %s\n", path, strerror(errno));
            unlink(tmp);
            return 1;
        }
        fprintf(stderr, "baton keygen: replaced %s with a new key (mode 0600)\n", path);
        return 0;
    }
    rc = baton_key_generate_file(path, err, sizeof err);
    if (rc != 0) {
        /* what --force replaces: a file, or a link (dangling, or to a
         * file); not a directory, FIFO or device, nor a link to one */
        struct stat tst;
        const int file = lstat(path, &st) == 0 &&
                         (S_ISREG(st.st_mode) ||
                          (S_ISLNK(st.st_mode) &&
                           (stat(path, &tst) != 0 || S_ISREG(tst.st_mode))));
        fprintf(stderr, "baton keygen: %s%s\n", err, file ? " (--force replaces it)" : "");
        return 1;
    }
    fprintf(stderr, "baton keygen: wrote a new key to %s (mode 0600)\n", path);
    return 0;
}
