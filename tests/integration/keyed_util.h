/* Shared helpers of the test programs that drive batond through libbaton
 * (tests/integration/peer_cases.c, pipeline_cases.c; limits_util.h takes
 * its check lines from here): "ok"/"not ok" check lines, key files,
 * connections in either role, and a process's thread count from /proc. */
#ifndef BATON_TESTS_KEYED_UTIL_H
#define BATON_TESTS_KEYED_UTIL_H

#include <dirent.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "auth/auth.h"
#include "baton/client.h"
#include "baton/status.h"

#ifndef TIMEOUT_MS
#define TIMEOUT_MS 10000 /* every libbaton call of a test program */
#endif

static int g_failed, g_n;

/* Prints "ok N - ..." or "not ok N - ..." and counts a failure. */
static inline void check(int ok, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static inline void check(int ok, const char *fmt, ...)
{
    va_list ap;
    g_n++;
    printf("%s %d - ", ok ? "ok" : "not ok", g_n);
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    printf("\n");
    fflush(stdout);
    if (!ok)
        g_failed++;
}

/* The key file at path; exits 1 (after a "not ok" line) when it cannot be
 * read. */
static inline struct baton_key *load_key(const char *path)
{
    char err[256];
    struct baton_key *k = NULL;
    if (baton_auth_init() != 0 || baton_key_open(path, &k, err, sizeof err) != 0) {
        printf("not ok - key %s: %s\n", path, err);
        exit(1);
    }
    return k;
}

/* A connection to 127.0.0.1:port in role (BATON_ROLE_CLIENT or
 * BATON_ROLE_PEER) with key; exits 1 when it cannot be made. */
static inline struct baton_conn *conn(uint16_t port, const struct baton_key *key, uint8_t role)
{
    struct baton_conn *c = NULL;
    struct baton_conn_options o = {.timeout_ms = TIMEOUT_MS, .key = key, .role = role};
    int rc = baton_conn_connect_ex("127.0.0.1", port, &o, &c);
    if (rc != 0) {
        printf("not ok - connect to 127.0.0.1:%u as %s: %s\n", (unsigned)port,
               role == BATON_ROLE_PEER ? "peer" : "client", baton_status_name(rc));
        exit(1);
    }
    return c;
}

/* Entries of a directory (not . and ..), or -1. */
static inline int count_dir(const char *path)
{
    DIR *d = opendir(path);
    int n = 0;
    if (!d)
        return -1;
    for (struct dirent *e; (e = readdir(d));)
        if (e->d_name[0] != '.')
            n++;
    closedir(d);
    return n;
}

/* Threads of process pid (/proc/PID/task), or -1. */
static inline int count_tasks(long pid)
{
    char p[64];
    snprintf(p, sizeof p, "/proc/%ld/task", pid);
    return count_dir(p);
}

#endif
