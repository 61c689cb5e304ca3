/* The throughput cost of frame integrity on the real transport: 64 MiB
 * SET_TENSOR and GET_TENSOR over loopback TCP between libbaton and the
 * batond dispatcher, on three servers in this process (each on its own
 * 127.0.0.1 port, served by its own threads): no key, a key (frames MAC'd,
 * ChaCha20-Poly1305 in MAC mode) and a key with --encrypt.
 *
 * Build and run with bench/auth_cost.sh (speed is measured, never asserted):
 *   bench/auth_cost.sh [BUILD_DIR] [REPS] [MIB]
 *
 * Each repetition runs every arm once, in a rotating order; each line gives
 * the median and the min..max over the repetitions in MB/s (10^6 B/s) of
 * payload. A SET is timed from submit to its reply, a GET from submit to
 * its last byte (and tag) received; the data is checked once per arm. */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "auth/auth.h"
#include "baton/client.h"
#include "baton/status.h"
#include "server/server.h"

#define MAX_REPS 31
#define N_ARMS 3

struct arm {
    const char *name;
    int keyed, encrypt;
    struct baton_server *srv;
    pthread_t thread;
    uint16_t port;
    struct baton_conn *conn;
    struct baton_tensor_desc t;
    double set_mbps[MAX_REPS], get_mbps[MAX_REPS];
};

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void *serve(void *arg)
{
    struct arm *a = arg;
    baton_server_run(a->srv);
    return NULL;
}

static int cmp_double(const void *x, const void *y)
{
    double a = *(const double *)x, b = *(const double *)y;
    return (a > b) - (a < b);
}

static void die(const char *what, int rc)
{
    fprintf(stderr, "transport_auth: %s: %s\n", what, baton_status_name(rc));
    exit(1);
}

int main(int argc, char **argv)
{
    struct arm arms[N_ARMS] = {
        {.name = "no key", .keyed = 0, .encrypt = 0},
        {.name = "key: frames MAC'd", .keyed = 1, .encrypt = 0},
        {.name = "key + encrypt", .keyed = 1, .encrypt = 1},
    };
    const char *key_path = argc > 1 ? argv[1] : NULL;
    int reps = argc > 2 ? atoi(argv[2]) : 9;
    uint64_t bytes = (argc > 3 ? strtoull(argv[3], NULL, 10) : 64) << 20;
    struct baton_key *key = NULL;
    char err[256];
    int rc;
    if (!key_path || reps < 1 || reps > MAX_REPS || bytes == 0 || bytes > (1ull << 30)) {
        fprintf(stderr, "usage: transport_auth KEY_FILE [REPS (1..31)] [MIB (1..1024)]\n");
        return 2;
    }
    signal(SIGPIPE, SIG_IGN);
    if (baton_auth_init() != 0 || baton_key_open(key_path, &key, err, sizeof err) != 0) {
        fprintf(stderr, "transport_auth: %s\n", err);
        return 1;
    }
    uint8_t *src = malloc(bytes), *dst = malloc(bytes);
    if (!src || !dst)
        return 1;
    randombytes_buf(src, bytes);
    memset(dst, 0, bytes);

    for (int i = 0; i < N_ARMS; i++) {
        struct arm *a = &arms[i];
        struct baton_server_config cfg;
        uint64_t handle;
        baton_server_config_default(&cfg);
        cfg.quiet = 1;
        cfg.total_memory_bytes = bytes + (64u << 20);
        cfg.max_message_bytes = bytes + 4096;
        cfg.client_key = a->keyed ? key : NULL;
        cfg.encrypt = a->encrypt;
        if ((rc = baton_server_create(&cfg, &a->srv)) != 0)
            die("server", rc);
        if ((rc = baton_server_listen(a->srv, "127.0.0.1", 0, &a->port)) != 0)
            die("listen", rc);
        pthread_create(&a->thread, NULL, serve, a);
        struct baton_conn_options o = {.timeout_ms = 60000, .key = a->keyed ? key : NULL};
        if ((rc = baton_conn_connect_ex("127.0.0.1", a->port, &o, &a->conn)) != 0)
            die("connect", rc);
        if (baton_conn_authenticated(a->conn) != a->keyed ||
            baton_conn_encrypted(a->conn) != a->encrypt)
            die("connection mode", BATON_E_PROTO);
        if ((rc = baton_alloc_buffer(a->conn, bytes, &handle)) != 0)
            die("alloc", rc);
        baton_tensor_init(&a->t, handle, 0, BATON_TYPE_I32, bytes / 4, 1, 1, 1);
        /* warm-up, and the data checked once per arm */
        if ((rc = baton_set_tensor(a->conn, &a->t, 0, src, bytes)) != 0 ||
            (rc = baton_get_tensor(a->conn, &a->t, 0, dst, bytes)) != 0)
            die("warm-up", rc);
        if (memcmp(src, dst, bytes) != 0)
            die("data differs", BATON_E_INVAL);
    }
    for (int r = 0; r < reps; r++) {
        for (int i = 0; i < N_ARMS; i++) {
            struct arm *a = &arms[(i + r) % N_ARMS]; /* rotate the order */
            double t0 = now();
            if ((rc = baton_set_tensor(a->conn, &a->t, 0, src, bytes)) != 0)
                die("set", rc);
            double t1 = now();
            if ((rc = baton_get_tensor(a->conn, &a->t, 0, dst, bytes)) != 0)
                die("get", rc);
            double t2 = now();
            a->set_mbps[r] = (double)bytes / (t1 - t0) / 1e6;
            a->get_mbps[r] = (double)bytes / (t2 - t1) / 1e6;
        }
    }
    printf("%llu MiB per SET_TENSOR / GET_TENSOR over loopback TCP, %d repetitions, "
           "MB/s = 10^6 B/s of payload\n",
           (unsigned long long)(bytes >> 20), reps);
    printf("%-20s %8s %8s %8s   %8s %8s %8s\n", "arm", "SET med", "min", "max", "GET med", "min",
           "max");
    double set_plain = 0, get_plain = 0;
    for (int i = 0; i < N_ARMS; i++) {
        struct arm *a = &arms[i];
        qsort(a->set_mbps, (size_t)reps, sizeof(double), cmp_double);
        qsort(a->get_mbps, (size_t)reps, sizeof(double), cmp_double);
        double sm = a->set_mbps[reps / 2], gm = a->get_mbps[reps / 2];
        if (i == 0) {
            set_plain = sm;
            get_plain = gm;
        }
        printf("%-20s %8.0f %8.0f %8.0f   %8.0f %8.0f %8.0f   (%.2fx, %.2fx of no key)\n",
               a->name, sm, a->set_mbps[0], a->set_mbps[reps - 1], gm, a->get_mbps[0],
               a->get_mbps[reps - 1], sm / set_plain, gm / get_plain);
    }
    for (int i = 0; i < N_ARMS; i++) {
        baton_conn_close(arms[i].conn);
        baton_server_stop(arms[i].srv);
        pthread_join(arms[i].thread, NULL);
        baton_server_destroy(arms[i].srv);
    }
    baton_key_free(key);
    free(src);
    free(dst);
    return 0;
}
