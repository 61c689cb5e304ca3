/* Standalone replay driver: runs one harness's LLVMFuzzerTestOneInput over
 * files and directories, so corpora and regressions replay under any
 * compiler (ctest fuzz_replay_<target>, ASan+UBSan builds) without a fuzzing
 * engine.
 *
 *   fuzz_<target> [-q] PATH...
 *
 * A directory is replayed in name order (not recursively); names starting
 * with '.' and README files are skipped. Each file's path is printed before
 * it runs (unless -q), so the last line before a sanitizer report names the
 * input. Exit status: 0 when every input ran, 1 when a path cannot be read
 * or no input was found at all, and whatever the sanitizer or abort() gives
 * on a failed input.
 */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fuzz_common.h"

#define REPLAY_MAX_BYTES (64u << 20) /* larger inputs are refused, not truncated */

static int quiet;
static unsigned long n_run;

static int read_file(const char *path, uint8_t **out, size_t *len)
{
    FILE *f = fopen(path, "rb");
    uint8_t *buf = NULL;
    size_t cap = 0, n = 0;
    int rc = -1;
    if (!f) {
        fprintf(stderr, "replay: %s: %s\n", path, strerror(errno));
        return -1;
    }
    for (;;) {
        if (n == cap) {
            size_t ncap = cap ? cap * 2 : 4096;
            uint8_t *nb;
            if (ncap > REPLAY_MAX_BYTES) {
                fprintf(stderr, "replay: %s: larger than %u bytes\n", path, REPLAY_MAX_BYTES);
                goto out;
            }
            nb = realloc(buf, ncap);
            if (!nb)
                goto out;
            buf = nb;
            cap = ncap;
        }
        size_t k = fread(buf + n, 1, cap - n, f);
        n += k;
        if (k == 0) {
            if (ferror(f)) {
                fprintf(stderr, "replay: %s: read error\n", path);
                goto out;
            }
            break;
        }
    }
    *out = buf;
    *len = n;
    buf = NULL;
    rc = 0;
out:
    free(buf);
    fclose(f);
    return rc;
}

static int run_file(const char *path)
{
    uint8_t *buf;
    size_t len;
    if (read_file(path, &buf, &len) != 0)
        return -1;
    if (!quiet) {
        printf("replay %s (%zu bytes)\n", path, len);
        fflush(stdout);
    }
    /* an exact-size copy: the harness sees the same bounds as under libFuzzer */
    uint8_t *exact = fuzz_dup(buf, len);
    free(buf);
    LLVMFuzzerTestOneInput(exact, len);
    free(exact);
    n_run++;
    return 0;
}

static int skip_name(const char *name)
{
    return name[0] == '.' || strncmp(name, "README", 6) == 0;
}

static int run_dir(const char *dir)
{
    struct dirent **ents;
    int n = scandir(dir, &ents, NULL, alphasort);
    int rc = 0;
    if (n < 0) {
        fprintf(stderr, "replay: %s: %s\n", dir, strerror(errno));
        return -1;
    }
    for (int i = 0; i < n; i++) {
        char path[4096];
        struct stat st;
        if (rc == 0 && !skip_name(ents[i]->d_name)) {
            int k = snprintf(path, sizeof path, "%s/%s", dir, ents[i]->d_name);
            if (k < 0 || (size_t)k >= sizeof path) {
                fprintf(stderr, "replay: path too long in %s\n", dir);
                rc = -1;
            } else if (stat(path, &st) == 0 && S_ISREG(st.st_mode)) {
                rc = run_file(path);
            }
        }
        free(ents[i]);
    }
    free(ents);
    return rc;
}

int main(int argc, char **argv)
{
    int first = 1;
    if (argc > 1 && strcmp(argv[1], "-q") == 0) {
        quiet = 1;
        first = 2;
    }
    if (first >= argc) {
        fprintf(stderr, "usage: %s [-q] FILE_OR_DIR...\n", argv[0]);
        return 1;
    }
    for (int i = first; i < argc; i++) {
        struct stat st;
        if (stat(argv[i], &st) != 0) {
            fprintf(stderr, "replay: %s: %s\n", argv[i], strerror(errno));
            return 1;
        }
        if ((S_ISDIR(st.st_mode) ? run_dir(argv[i]) : run_file(argv[i])) != 0)
            return 1;
    }
    if (n_run == 0) {
        fprintf(stderr, "replay: no input found\n");
        return 1;
    }
    printf("replay: %lu inputs, no failure\n", n_run);
    return 0;
}
