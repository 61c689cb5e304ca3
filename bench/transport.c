/* batond's transport through libbaton, for bench/transport.sh: the same
 * shapes as bench/rawtcp.c measures on a bare socket.
 *
 *   transport PORT [--port2 P2] [--key FILE] [--mib-list 1,64]
 *             [--rtt-iters N] [--handoff-kib K] [--phase stream|rtt|all]
 *             [--direct]
 *
 * Connects to a running batond on 127.0.0.1:PORT (with --key: AUTH, frames
 * MAC'd; the server must run with the same --key) and prints one
 * `key=value` line per figure (figures only, never a test):
 *   stream phase, per size M MiB (sizes below 64 MiB repeated to 64 MiB):
 *     baton_set_MMiB_MBs   SET_TENSOR of M MiB, submit to reply
 *     baton_get_MMiB_MBs   GET_TENSOR of M MiB, request to last byte
 *   rtt phase:
 *     baton_get4_rtt_us    mean over N GET_TENSORs of 4 bytes
 *     baton_graph_rtt_us   mean over N/4 GRAPH_COMPUTEs of one ADD of two
 *                          2x2 F32 leaves (a trivial step: framing,
 *                          validation, dispatch, reply)
 *     baton_handoff_hub_us with --port2: mean over N/10 rounds of GET of K
 *                          KiB from server 1 then SET of them into server 2
 *                          (a stage boundary through the coordinator)
 *     baton_handoff_direct_us  with --port2 and --direct: mean over N/10
 *                          COPY_TENSOR_TOs of K KiB from server 1 into a
 *                          GRANT_WRITE of server 2 (server 1 sends it as a
 *                          PEER_WRITE over its own peer link; both servers
 *                          need the peer key and server 1 must list server
 *                          2 with --peer). `not_available` without --direct,
 *                          or when this libbaton has no COPY_TENSOR_TO call;
 *                          `not_done_R` when the server answered outcome R
 *                          (enum baton_copy_outcome) instead of copying.
 * MB = 1e6 bytes of payload. The data of each size and of the hand-off is
 * checked once (byte-exact round trip) before timing.
 */
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "auth/auth.h"
#include "baton/client.h"
#include "baton/status.h"

#define MAX_SIZES 8
#define MAX_MIB 1024u

static double now(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void die(const char *what, int rc)
{
    fprintf(stderr, "transport: %s: %s\n", what, baton_status_name(rc));
    exit(1);
}

static struct baton_conn *connect_to(unsigned port, const struct baton_key *key)
{
    struct baton_conn_options o = {.timeout_ms = 60000, .key = key};
    struct baton_conn *c = NULL;
    int rc = baton_conn_connect_ex("127.0.0.1", (uint16_t)port, &o, &c);

    if (rc != 0)
        die("connect", rc);
    if (baton_conn_authenticated(c) != (key != NULL))
        die("connection mode differs from --key", BATON_E_PROTO);
    return c;
}

/* One buffer of `bytes` on c, described as I32 elements. */
static void alloc_tensor(struct baton_conn *c, uint64_t bytes, struct baton_tensor_desc *t)
{
    uint64_t h;
    int rc = baton_alloc_buffer(c, bytes, &h);

    if (rc != 0)
        die("ALLOC_BUFFER", rc);
    if ((rc = baton_tensor_init(t, h, 0, BATON_TYPE_I32, bytes / 4, 1, 1, 1)) != 0)
        die("tensor", rc);
}

static void fill(uint8_t *p, size_t n, uint32_t seed)
{
    size_t i;

    for (i = 0; i < n; i++) {
        seed = seed * 1103515245u + 12345u;
        p[i] = (uint8_t)(seed >> 16);
    }
}

static void phase_stream(struct baton_conn *c, const uint64_t *sizes, unsigned n_sizes)
{
    uint64_t cap = 0;
    uint8_t *src, *dst;
    unsigned i, r;

    for (i = 0; i < n_sizes; i++)
        if (sizes[i] > cap)
            cap = sizes[i];
    src = malloc((size_t)cap);
    dst = malloc((size_t)cap);
    if (!src || !dst)
        die("malloc", BATON_E_NOMEM);
    fill(src, (size_t)cap, 7);
    for (i = 0; i < n_sizes; i++) {
        const unsigned reps = sizes[i] >= (64u << 20) ? 1 : (unsigned)((64u << 20) / sizes[i]);
        struct baton_tensor_desc t;
        double t0, t1, t2;
        int rc;

        alloc_tensor(c, sizes[i], &t);
        memset(dst, 0, (size_t)sizes[i]);
        if ((rc = baton_set_tensor(c, &t, 0, src, sizes[i])) != 0 ||
            (rc = baton_get_tensor(c, &t, 0, dst, sizes[i])) != 0)
            die("warm-up", rc);
        if (memcmp(src, dst, (size_t)sizes[i]) != 0)
            die("data differs after SET/GET", BATON_E_INVAL);
        t0 = now();
        for (r = 0; r < reps; r++)
            if ((rc = baton_set_tensor(c, &t, 0, src, sizes[i])) != 0)
                die("SET_TENSOR", rc);
        t1 = now();
        for (r = 0; r < reps; r++)
            if ((rc = baton_get_tensor(c, &t, 0, dst, sizes[i])) != 0)
                die("GET_TENSOR", rc);
        t2 = now();
        printf("baton_set_%lluMiB_MBs=%.1f\n", (unsigned long long)(sizes[i] >> 20),
               (double)sizes[i] * reps / (t1 - t0) / 1e6);
        printf("baton_get_%lluMiB_MBs=%.1f\n", (unsigned long long)(sizes[i] >> 20),
               (double)sizes[i] * reps / (t2 - t1) / 1e6);
        if ((rc = baton_free_buffer(c, t.buffer)) != 0)
            die("FREE_BUFFER", rc);
    }
    free(src);
    free(dst);
}

/* The direct hand-off: server 1 copies s1 into a write grant on s2 of
 * server 2 (127.0.0.1:port2) with COPY_TENSOR_TO. The libbaton calls for it
 * come with the direct path (BATON_PEER_FAMILY_IPV4 marks a wire.h that
 * has them); without them this prints not_available. */
static void handoff_direct(struct baton_conn *c, struct baton_conn *c2, unsigned port2,
                           const struct baton_tensor_desc *s1, const struct baton_tensor_desc *s2,
                           const uint8_t *src, uint8_t *chk, uint64_t bytes, unsigned rounds)
{
#ifdef BATON_PEER_FAMILY_IPV4
    struct baton_peer_dest dest;
    struct baton_copy_result res;
    double t0 = 0;
    unsigned i;
    int rc;

    memset(&dest, 0, sizeof(dest));
    dest.family = BATON_PEER_FAMILY_IPV4;
    dest.port = (uint16_t)port2;
    dest.addr[0] = 127;
    dest.addr[3] = 1;
    if ((rc = baton_grant_write(c2, s2->buffer, s2->offset, bytes, dest.grant)) != 0) {
        fprintf(stderr, "transport: GRANT_WRITE: %s\n", baton_status_name(rc));
        printf("baton_handoff_direct_us=not_available\n");
        return;
    }
    memset(chk, 0, (size_t)bytes);
    if ((rc = baton_set_tensor(c2, s2, 0, chk, bytes)) != 0)
        die("SET_TENSOR", rc);
    for (i = 0; i < rounds + 10; i++) { /* the first 10 warm up (and dial the link) */
        if (i == 10)
            t0 = now();
        struct baton_copy_options opt = {.seq = (uint64_t)i + 1, .flags = 0};

        memset(&res, 0, sizeof(res));
        if ((rc = baton_copy_tensor_to(c, s1, 0, bytes, &dest, &opt, &res)) != 0)
            die("COPY_TENSOR_TO", rc);
        if (res.result != BATON_COPY_DONE) {
            printf("baton_handoff_direct_us=not_done_%u\n", (unsigned)res.result);
            return;
        }
    }
    printf("baton_handoff_direct_us=%.2f\n", (now() - t0) / rounds * 1e6);
    if ((rc = baton_get_tensor(c2, s2, 0, chk, bytes)) != 0)
        die("GET_TENSOR", rc);
    if (memcmp(src, chk, (size_t)bytes) != 0)
        die("direct hand-off data differs", BATON_E_INVAL);
    (void)baton_revoke_grant(c2, dest.grant);
#else
    (void)c;
    (void)c2;
    (void)port2;
    (void)s1;
    (void)s2;
    (void)src;
    (void)chk;
    (void)bytes;
    (void)rounds;
    printf("baton_handoff_direct_us=not_available\n");
#endif
}

static void phase_rtt(struct baton_conn *c, struct baton_conn *c2, unsigned port2, int direct,
                      unsigned iters, unsigned handoff_kib)
{
    struct baton_tensor_desc t, leaves[3];
    struct baton_graph_node node;
    struct baton_graph g;
    const float a[4] = {1.5f, -2, 3, 0}, b[4] = {0.25f, 2, -10, 7}, want[4] = {1.75f, 0, -7, 7};
    float out[4] = {0};
    uint32_t v = 0x01020304u, back = 0;
    uint64_t h;
    unsigned i, k;
    double t0;
    int rc;

    alloc_tensor(c, 4096, &t);
    if ((rc = baton_set_tensor(c, &t, 0, &v, 4)) != 0)
        die("SET_TENSOR", rc);
    for (i = 0; i < 100; i++) /* warm-up */
        if ((rc = baton_get_tensor(c, &t, 0, &back, 4)) != 0)
            die("GET_TENSOR", rc);
    if (back != v)
        die("4-byte GET differs", BATON_E_INVAL);
    t0 = now();
    for (i = 0; i < iters; i++)
        if ((rc = baton_get_tensor(c, &t, 0, &back, 4)) != 0)
            die("GET_TENSOR", rc);
    printf("baton_get4_rtt_us=%.2f\n", (now() - t0) / iters * 1e6);

    /* trivial step: out = a + b over 2x2 F32 leaves in one buffer */
    if ((rc = baton_alloc_buffer(c, 48, &h)) != 0)
        die("ALLOC_BUFFER", rc);
    for (k = 0; k < 3; k++)
        if ((rc = baton_tensor_init(&leaves[k], h, (uint64_t)k * 16, BATON_TYPE_F32, 2, 2, 1, 1)) !=
            0)
            die("tensor", rc);
    if ((rc = baton_set_tensor(c, &leaves[0], 0, a, 16)) != 0 ||
        (rc = baton_set_tensor(c, &leaves[1], 0, b, 16)) != 0)
        die("SET_TENSOR", rc);
    memset(&node, 0, sizeof(node));
    node.op = BATON_OP_ADD;
    node.type = BATON_TYPE_F32;
    node.ne[0] = node.ne[1] = 2;
    node.ne[2] = node.ne[3] = 1;
    for (k = 0; k < BATON_MAX_SRC; k++)
        node.src[k] = BATON_SRC_NONE;
    node.src[0] = 0;
    node.src[1] = 1;
    node.out_leaf = 2;
    memset(&g, 0, sizeof(g));
    g.n_leaves = 3;
    g.n_nodes = 1;
    g.leaves = leaves;
    g.nodes = &node;
    if ((rc = baton_graph_compute(c, &g)) != 0 ||
        (rc = baton_get_tensor(c, &leaves[2], 0, out, 16)) != 0)
        die("GRAPH_COMPUTE", rc);
    if (memcmp(out, want, sizeof(out)) != 0)
        die("GRAPH_COMPUTE result differs", BATON_E_INVAL);
    k = iters / 4 ? iters / 4 : 1;
    t0 = now();
    for (i = 0; i < k; i++)
        if ((rc = baton_graph_compute(c, &g)) != 0)
            die("GRAPH_COMPUTE", rc);
    printf("baton_graph_rtt_us=%.2f\n", (now() - t0) / k * 1e6);

    if (c2 && handoff_kib > 0) {
        const uint64_t bytes = (uint64_t)handoff_kib << 10;
        const unsigned rounds = iters / 10 ? iters / 10 : 1;
        struct baton_tensor_desc s1, s2;
        uint8_t *src = malloc((size_t)bytes), *hub = malloc((size_t)bytes),
                *chk = malloc((size_t)bytes);

        if (!src || !hub || !chk)
            die("malloc", BATON_E_NOMEM);
        fill(src, (size_t)bytes, 11);
        alloc_tensor(c, bytes, &s1);
        alloc_tensor(c2, bytes, &s2);
        if ((rc = baton_set_tensor(c, &s1, 0, src, bytes)) != 0)
            die("SET_TENSOR", rc);
        for (i = 0; i < rounds + 10; i++) { /* the first 10 warm up */
            if (i == 10)
                t0 = now();
            if ((rc = baton_get_tensor(c, &s1, 0, hub, bytes)) != 0 ||
                (rc = baton_set_tensor(c2, &s2, 0, hub, bytes)) != 0)
                die("hand-off", rc);
        }
        printf("baton_handoff_hub_us=%.2f\n", (now() - t0) / rounds * 1e6);
        if ((rc = baton_get_tensor(c2, &s2, 0, chk, bytes)) != 0)
            die("GET_TENSOR", rc);
        if (memcmp(src, chk, (size_t)bytes) != 0)
            die("hand-off data differs", BATON_E_INVAL);
        if (direct)
            handoff_direct(c, c2, port2, &s1, &s2, src, chk, bytes, rounds);
        else
            printf("baton_handoff_direct_us=not_available\n");
        free(src);
        free(hub);
        free(chk);
    }
}

int main(int argc, char **argv)
{
    const char *key_path = NULL, *mib_list = "1,64", *phase = "all";
    unsigned long port = 0, port2 = 0;
    unsigned rtt_iters = 2000, handoff_kib = 256, n_sizes = 0;
    int direct = 0;
    uint64_t sizes[MAX_SIZES];
    struct baton_key *key = NULL;
    struct baton_conn *c, *c2 = NULL;
    char err[256], *list, *save = NULL, *tok;
    int i;

    if (argc < 2)
        goto usage;
    port = strtoul(argv[1], NULL, 10);
    for (i = 2; i < argc; i++) {
        if (strcmp(argv[i], "--port2") == 0 && i + 1 < argc)
            port2 = strtoul(argv[++i], NULL, 10);
        else if (strcmp(argv[i], "--key") == 0 && i + 1 < argc)
            key_path = argv[++i];
        else if (strcmp(argv[i], "--mib-list") == 0 && i + 1 < argc)
            mib_list = argv[++i];
        else if (strcmp(argv[i], "--rtt-iters") == 0 && i + 1 < argc)
            rtt_iters = (unsigned)strtoul(argv[++i], NULL, 10);
        else if (strcmp(argv[i], "--handoff-kib") == 0 && i + 1 < argc)
            handoff_kib = (unsigned)strtoul(argv[++i], NULL, 10);
        else if (strcmp(argv[i], "--phase") == 0 && i + 1 < argc)
            phase = argv[++i];
        else if (strcmp(argv[i], "--direct") == 0)
            direct = 1;
        else
            goto usage;
    }
    if (port < 1 || port > 65535 || port2 > 65535 || rtt_iters < 1 || rtt_iters > 10000000 ||
        handoff_kib > (1u << 20) ||
        (strcmp(phase, "all") != 0 && strcmp(phase, "stream") != 0 && strcmp(phase, "rtt") != 0))
        goto usage;
    list = strdup(mib_list);
    if (!list)
        return 1;
    for (tok = strtok_r(list, ",", &save); tok && n_sizes < MAX_SIZES;
         tok = strtok_r(NULL, ",", &save)) {
        const unsigned long m = strtoul(tok, NULL, 10);

        if (m < 1 || m > MAX_MIB) {
            fprintf(stderr, "transport: size %s MiB out of 1..%u\n", tok, MAX_MIB);
            free(list);
            return 2;
        }
        sizes[n_sizes++] = (uint64_t)m << 20;
    }
    free(list);
    signal(SIGPIPE, SIG_IGN);
    if (baton_auth_init() != 0) {
        fprintf(stderr, "transport: cannot initialise libsodium\n");
        return 1;
    }
    if (key_path && baton_key_open(key_path, &key, err, sizeof(err)) != 0) {
        fprintf(stderr, "transport: %s\n", err);
        return 1;
    }
    c = connect_to((unsigned)port, key);
    if (port2)
        c2 = connect_to((unsigned)port2, key);
    if (strcmp(phase, "rtt") != 0)
        phase_stream(c, sizes, n_sizes);
    if (strcmp(phase, "stream") != 0)
        phase_rtt(c, c2, (unsigned)port2, direct, rtt_iters, handoff_kib);
    baton_conn_close(c);
    if (c2)
        baton_conn_close(c2);
    baton_key_free(key);
    return 0;
usage:
    fprintf(stderr, "usage: transport PORT [--port2 P2] [--key FILE] [--mib-list 1,64]\n"
                    "                 [--rtt-iters N] [--handoff-kib K] [--phase stream|rtt|all]\n"
                    "                 [--direct]\n");
    return 2;
}
