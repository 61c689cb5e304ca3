/* buffer_hog PORT READY-FILE [SPARE]
 * buffer_hog PORT READY-FILE --bytes N
 *
 * Fills a batond's server-wide table of buffers (BATON_MAX_BUFFERS): one
 * session on 127.0.0.1:PORT allocates 64-byte buffers until ALLOC_BUFFER
 * answers E_LIMIT, frees SPARE of them (default 1), writes the number it
 * still holds to READY-FILE (a temporary file renamed into place), and then
 * keeps the session open until it is killed. A test can so make the
 * (SPARE + 1)-th ALLOC_BUFFER of another client fail with E_LIMIT while
 * memory is plentiful. With --bytes N it allocates one buffer of N bytes
 * instead (the server's memory for all sessions then has that much less
 * free) and writes 1. Exit 1 when the table does not fill as expected (or
 * the buffer is refused), 2 on a usage error. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "baton/client.h"
#include "baton/status.h"
#include "core/limits.h"

int main(int argc, char **argv)
{
    static uint64_t handles[BATON_MAX_BUFFERS];
    struct baton_conn *c = NULL;
    uint32_t n = 0, spare = 1;
    char tmp[4096];
    FILE *f;
    int rc = 0;

    const int by_bytes = argc == 5 && strcmp(argv[3], "--bytes") == 0;
    const long long bytes = by_bytes ? atoll(argv[4]) : 0;

    if (argc < 3 || argc > 5 || atoi(argv[1]) <= 0 || atoi(argv[1]) > 65535 ||
        (argc == 4 && (atoi(argv[3]) < 0 || atoi(argv[3]) > 16)) ||
        (argc == 5 && (!by_bytes || bytes <= 0))) {
        fprintf(stderr, "usage: buffer_hog PORT READY-FILE [SPARE | --bytes N]\n");
        return 2;
    }
    if (argc == 4)
        spare = (uint32_t)atoi(argv[3]);
    if (baton_conn_connect("127.0.0.1", (uint16_t)atoi(argv[1]), 10000, &c) != 0) {
        fprintf(stderr, "buffer_hog: cannot connect to port %s\n", argv[1]);
        return 1;
    }
    if (by_bytes) {
        uint64_t h;

        rc = baton_alloc_buffer(c, (uint64_t)bytes, &h);
        if (rc != 0) {
            fprintf(stderr, "buffer_hog: ALLOC_BUFFER of %lld bytes: %s\n", bytes,
                    baton_status_name(rc));
            return 1;
        }
        n = 1;
        spare = 0;
    }
    while (!by_bytes) {
        uint64_t h;

        rc = baton_alloc_buffer(c, 64, &h);
        if (rc != 0)
            break;
        if (n == BATON_MAX_BUFFERS) { /* a table larger than the limit says */
            fprintf(stderr, "buffer_hog: more than %u buffers granted\n", BATON_MAX_BUFFERS);
            return 1;
        }
        handles[n++] = h;
    }
    if (!by_bytes && (rc != BATON_E_LIMIT || n < spare)) {
        fprintf(stderr, "buffer_hog: after %u buffers: %s, not E_LIMIT\n", n,
                baton_status_name(rc));
        return 1;
    }
    while (spare > 0) {
        if (baton_free_buffer(c, handles[--n]) != 0) {
            fprintf(stderr, "buffer_hog: FREE_BUFFER failed\n");
            return 1;
        }
        spare--;
    }
    snprintf(tmp, sizeof tmp, "%s.tmp", argv[2]);
    f = fopen(tmp, "w");
    if (f == NULL || fprintf(f, "%u\n", n) < 0 || fclose(f) != 0 || rename(tmp, argv[2]) != 0) {
        fprintf(stderr, "buffer_hog: cannot write %s\n", argv[2]);
        return 1;
    }
    for (;;)
        pause();
}
