/* fair_compute PORT SLICE_MS [CHAIN]
 * fair_compute keys PORT A_KEY B_KEY   (see cmd_keys)
 * fair_compute hold PORT SENT_FILE     (sends the long graph, writes
 *     SENT_FILE, then waits for its reply or to be killed: the script
 *     kills it, or stops batond, while the graph runs)
 *
 * Sessions take turns on batond's compute device (issue 15; compute_slice,
 * src/server/server.c server_device_*, baton_graph_execute_turns). Session A
 * sends one long graph: a chain of CHAIN (default 24, at most 24) MUL_MATs, W {1024, 1024} F32 by
 * {1024, 512} (1.07 GFLOP each, so each also runs in five pieces of rows).
 * Session B, meanwhile, sends a small step (one MUL_MAT of 64 x 64 by 1)
 * every 20 ms and times each from send to reply. Checked:
 *   - A's graph alone takes T_A (at least 8 default slices, 80 ms, else
 *     the test says so and fails: the machine is too fast for it to mean
 *     anything);
 *   - while A runs, B's steps are served: the longest wait is under T_A / 4
 *     (without turns B's first step would wait for most of A's graph) and
 *     is printed beside the slice;
 *   - A's result is the same, bit for bit, with B's steps in between.
 * Prints ok / not ok lines; exit 0 iff all passed. Loopback only. */
#include <math.h>
#include <pthread.h>

#include "limits_util.h"

#define K 1024
#define M 512
#define N_CHAIN 24
#define SMALL 64

static uint16_t g_port;
static uint32_t g_chain = N_CHAIN;
static const struct baton_key *g_key; /* the key of the next connection (NULL: none) */

/* A client with a deadline long enough for a sanitizer build's graphs. */
static struct baton_conn *slow_client(void)
{
    struct baton_conn *c = NULL;
    struct baton_conn_options o = {.timeout_ms = 300000, .key = g_key, .role = BATON_ROLE_CLIENT};
    int rc = baton_conn_connect_ex("127.0.0.1", g_port, &o, &c);
    if (rc != 0) {
        printf("not ok - connect: %s\n", baton_status_name(rc));
        exit(1);
    }
    return c;
}


/* ---- session A: the long graph ---- */

struct long_graph {
    struct baton_conn *c;
    struct baton_tensor_desc leaves[3]; /* W, x, out */
    struct baton_graph_node nodes[N_CHAIN];
    struct baton_graph g;
};

static int long_setup(struct long_graph *a)
{
    static float w[K * K], x[K * M];
    uint64_t h;
    uint32_t s = 99;
    a->c = slow_client();
    for (size_t i = 0; i < (size_t)K * K; i++) {
        s = s * 1664525u + 1013904223u;
        /* about 1/sqrt(K) in size, so the chain's values stay near 1 */
        w[i] = ((float)(s >> 9) / (float)(1u << 23) - 0.5f) * (2.0f / 32.0f) * 1.7f;
    }
    for (size_t i = 0; i < (size_t)K * M; i++)
        x[i] = (float)((i * 7) % 13) / 13.0f - 0.5f;
    int rc = baton_alloc_buffer(a->c, (uint64_t)(K * K + 2 * K * M) * 4, &h);
    if (rc == 0)
        rc = baton_tensor_init(&a->leaves[0], h, 0, BATON_TYPE_F32, K, K, 1, 1);
    if (rc == 0)
        rc = baton_tensor_init(&a->leaves[1], h, (uint64_t)K * K * 4, BATON_TYPE_F32, K, M, 1, 1);
    if (rc == 0)
        rc = baton_tensor_init(&a->leaves[2], h, (uint64_t)(K * K + K * M) * 4, BATON_TYPE_F32, K,
                               M, 1, 1);
    if (rc == 0)
        rc = baton_set_tensor(a->c, &a->leaves[0], 0, w, sizeof w);
    if (rc == 0)
        rc = baton_set_tensor(a->c, &a->leaves[1], 0, x, sizeof x);
    for (uint32_t i = 0; i < g_chain; i++) {
        node_init(&a->nodes[i], BATON_OP_MUL_MAT, K, M);
        a->nodes[i].src[0] = 0;
        a->nodes[i].src[1] = i == 0 ? 1 : 3 + i - 1; /* the previous node's result */
    }
    a->nodes[g_chain - 1].out_leaf = 2;
    a->g = (struct baton_graph){.n_leaves = 3, .n_nodes = g_chain, .leaves = a->leaves,
                                .nodes = a->nodes};
    return rc;
}

/* Runs A's graph; returns its time in ms (-1 on an error) and its result. */
static int64_t long_run(struct long_graph *a, float *out)
{
    int64_t t0 = now_ms();
    int rc = baton_graph_compute(a->c, &a->g);
    int64_t t = now_ms() - t0;
    if (rc == 0)
        rc = baton_get_tensor(a->c, &a->leaves[2], 0, out, (uint64_t)K * M * 4);
    if (rc != 0)
        printf("# A: %s\n", baton_status_name(rc));
    return rc == 0 ? t : -1;
}

/* ---- session B: small steps ---- */

struct small_step {
    struct baton_conn *c;
    struct baton_tensor_desc leaves[3];
    struct baton_graph_node node;
    struct baton_graph g;
};

static int small_setup(struct small_step *b)
{
    static float w[SMALL * SMALL], x[SMALL];
    uint64_t h;
    b->c = slow_client();
    for (int i = 0; i < SMALL * SMALL; i++)
        w[i] = (float)(i % 5);
    for (int i = 0; i < SMALL; i++)
        x[i] = 1.0f;
    int rc = baton_alloc_buffer(b->c, (SMALL * SMALL + 2 * SMALL) * 4, &h);
    if (rc == 0)
        rc = baton_tensor_init(&b->leaves[0], h, 0, BATON_TYPE_F32, SMALL, SMALL, 1, 1);
    if (rc == 0)
        rc = baton_tensor_init(&b->leaves[1], h, SMALL * SMALL * 4, BATON_TYPE_F32, SMALL, 1, 1, 1);
    if (rc == 0)
        rc = baton_tensor_init(&b->leaves[2], h, (SMALL * SMALL + SMALL) * 4, BATON_TYPE_F32, SMALL,
                               1, 1, 1);
    if (rc == 0)
        rc = baton_set_tensor(b->c, &b->leaves[0], 0, w, sizeof w);
    if (rc == 0)
        rc = baton_set_tensor(b->c, &b->leaves[1], 0, x, sizeof x);
    node_init(&b->node, BATON_OP_MUL_MAT, SMALL, 1);
    b->node.src[0] = 0;
    b->node.src[1] = 1;
    b->node.out_leaf = 2;
    b->g = (struct baton_graph){.n_leaves = 3, .n_nodes = 1, .leaves = b->leaves,
                                .nodes = &b->node};
    return rc;
}

/* One step of B, its wait in ms (-1 on an error). */
static int64_t small_run(struct small_step *b)
{
    int64_t t0 = now_ms();
    int rc = baton_graph_compute(b->c, &b->g);
    return rc == 0 ? now_ms() - t0 : -1;
}

/* B's waits while busy() says the long graphs run: a step every 20 ms,
 * each timed from send to reply. */
struct waits {
    int64_t worst, sum;
    int steps, failed;
};

static struct waits measure_waits(struct small_step *b, int (*busy)(void))
{
    struct waits w = {0, 0, 0, 0};
    while (busy()) {
        /* sent while the graphs compute: it counts, however long it waits */
        int64_t t = small_run(b);
        if (t < 0) {
            w.failed++;
            break;
        }
        w.steps++;
        w.sum += t;
        if (t > w.worst)
            w.worst = t;
        sleep_ms(20);
    }
    return w;
}

static struct long_graph g_a;
static float g_out_busy[K * M];
static int64_t g_busy_ms;
static volatile int g_a_done;

static int a_busy(void)
{
    return !g_a_done;
}

static void *a_thread(void *arg)
{
    (void)arg;
    g_busy_ms = long_run(&g_a, g_out_busy);
    g_a_done = 1;
    return NULL;
}

/* ---- keys: named client keys with limits of their own ---- */

#define A_CONNS 3
static struct long_graph g_ka[A_CONNS];
static float g_kout[A_CONNS][K * M];
static int64_t g_kms[A_CONNS];
static volatile int g_k_running;

static int all_a_running(void)
{
    return __atomic_load_n(&g_k_running, __ATOMIC_SEQ_CST) == A_CONNS;
}

static void *ka_thread(void *arg)
{
    int i = (int)(intptr_t)arg;
    g_kms[i] = long_run(&g_ka[i], g_kout[i]);
    __atomic_fetch_sub(&g_k_running, 1, __ATOMIC_SEQ_CST);
    return NULL;
}

/* A batond with `client = team-a A_KEY max_connections=3` and `client =
 * team-b B_KEY max_connections=2 max_graph_flops=1G
 * session_memory_bytes=16M` (test_client_keys.sh):
 *   - team-a holds its 3 connections: a 4th is refused (E_LIMIT), and
 *     team-b still gets its 2 (never refused for lack of slots); a 3rd of
 *     team-b's is refused;
 *   - team-b's graph budget and session memory are its own: a 2.1 GFLOP
 *     graph and a 20 MiB buffer are refused for team-b (E_LIMIT, E_QUOTA)
 *     and accepted for team-a;
 *   - team-a's 3 sessions each run a long graph at once, while team-b
 *     sends a small step every 20 ms: team-b's longest wait stays under a
 *     quarter of one team-a graph (printed: the device goes to another
 *     key's waiting session first, so team-b waits about one turn, not one
 *     per team-a session). */
static int cmd_keys(const char *a_path, const char *b_path)
{
    struct baton_key *ka = load_key(a_path), *kb = load_key(b_path);
    struct baton_conn *extra = NULL, *b2 = NULL, *b3 = NULL;
    struct baton_conn_options oa = {.timeout_ms = 10000, .key = ka, .role = BATON_ROLE_CLIENT};
    struct baton_conn_options ob = {.timeout_ms = 10000, .key = kb, .role = BATON_ROLE_CLIENT};
    static struct small_step b;
    static float out[K * M];
    uint64_t h;

    g_chain = 8;
    g_key = ka;
    for (int i = 0; i < A_CONNS; i++)
        check(long_setup(&g_ka[i]) == 0, "team-a connection %d set up", i + 1);
    int rc = baton_conn_connect_ex("127.0.0.1", g_port, &oa, &extra);
    check(rc == BATON_E_LIMIT, "team-a's 4th connection is refused: %s (want E_LIMIT)",
          baton_status_name(rc));
    baton_conn_close(extra);
    g_key = kb;
    check(small_setup(&b) == 0, "team-b's first connection is served while team-a is full");
    rc = baton_conn_connect_ex("127.0.0.1", g_port, &ob, &b2);
    check(rc == 0, "team-b's second connection too: %s", baton_status_name(rc));
    rc = baton_conn_connect_ex("127.0.0.1", g_port, &ob, &b3);
    check(rc == BATON_E_LIMIT, "team-b's 3rd connection is refused: %s (want E_LIMIT)",
          baton_status_name(rc));
    baton_conn_close(b3);

    /* team-b's own graph budget (1G) and session memory (16 MiB) */
    {
        /* one 2.1 GFLOP product (K 1024, 1024 rows, 1024 columns) */
        struct baton_tensor_desc t[3];
        struct baton_graph_node n;
        rc = baton_alloc_buffer(b2, 3ull * 1024 * 1024 * 4, &h);
        for (int i = 0; rc == 0 && i < 3; i++)
            rc = baton_tensor_init(&t[i], h, (uint64_t)i * 1024 * 1024 * 4, BATON_TYPE_F32, 1024,
                                   1024, 1, 1);
        node_init(&n, BATON_OP_MUL_MAT, 1024, 1024);
        n.src[0] = 0;
        n.src[1] = 1;
        n.out_leaf = 2;
        struct baton_graph g = {.n_leaves = 3, .n_nodes = 1, .leaves = t, .nodes = &n};
        check(rc == 0 && baton_graph_compute(b2, &g) == BATON_E_LIMIT,
              "a 2.1 GFLOP graph is over team-b's budget: E_LIMIT");
        uint64_t h2;
        check(baton_alloc_buffer(b2, 20ull << 20, &h2) == BATON_E_QUOTA,
              "20 MiB is over team-b's session memory: E_QUOTA");
        uint64_t ha;
        rc = baton_alloc_buffer(g_ka[0].c, 20ull << 20, &ha);
        check(rc == 0 && baton_free_buffer(g_ka[0].c, ha) == 0,
              "20 MiB is within team-a's session memory");
        rc = baton_alloc_buffer(g_ka[0].c, 3ull * 1024 * 1024 * 4, &ha);
        for (int i = 0; rc == 0 && i < 3; i++)
            rc = baton_tensor_init(&t[i], ha, (uint64_t)i * 1024 * 1024 * 4, BATON_TYPE_F32,
                                   1024, 1024, 1, 1);
        check(rc == 0 && baton_graph_compute(g_ka[0].c, &g) == 0,
              "the same graph runs for team-a (its budget is the server's)");
        baton_free_buffer(g_ka[0].c, ha);
    }

    /* fairness across keys */
    int64_t t_one = long_run(&g_ka[0], out);
    check(t_one >= 80, "one team-a graph alone: %lld ms (at least 8 default slices)",
          (long long)t_one);
    /* A wait is a time on a shared host: a scheduling stall of the test's
     * own threads can pass a quarter graph once. Up to 3 attempts; a server
     * without turns across keys (team-b behind all three team-a sessions)
     * fails every one. */
    int64_t worst = 0;
    int steps = 0, failed = 0;
    for (int attempt = 1; attempt <= 3; attempt++) {
        pthread_t th[A_CONNS];
        g_k_running = A_CONNS;
        for (int i = 0; i < A_CONNS; i++)
            if (pthread_create(&th[i], NULL, ka_thread, (void *)(intptr_t)i) != 0)
                return 1;
        sleep_ms((int)(t_one / 8));
        struct waits wt = measure_waits(&b, all_a_running);
        worst = wt.worst;
        steps = wt.steps;
        failed = wt.failed;
        for (int i = 0; i < A_CONNS; i++)
            pthread_join(th[i], NULL);
        printf("# attempt %d: team-b's wait while team-a's 3 sessions compute: longest %lld ms, "
               "mean %.1f ms (%d steps); one team-a graph alone %lld ms, the three together "
               "%lld/%lld/%lld ms\n",
               attempt, (long long)worst, steps ? (double)wt.sum / steps : 0.0, steps,
               (long long)t_one, (long long)g_kms[0], (long long)g_kms[1], (long long)g_kms[2]);
        if (failed != 0 || (steps >= 1 && worst < t_one / 4))
            break;
    }
    check(failed == 0 && steps >= 1 && worst < t_one / 4,
          "team-b's longest wait (%lld ms) is under a quarter of one team-a graph (%lld ms)",
          (long long)worst, (long long)t_one);
    int same = 1;
    for (int i = 0; i < A_CONNS; i++)
        same &= g_kms[i] > 0 && memcmp(g_kout[i], out, sizeof out) == 0;
    check(same, "team-a's three results are the bits of the graph alone");
    baton_conn_close(b.c);
    baton_conn_close(b2);
    for (int i = 0; i < A_CONNS; i++)
        baton_conn_close(g_ka[i].c);
    baton_key_free(ka);
    baton_key_free(kb);
    printf("%d checks, %d failed\n", g_n, g_failed);
    return g_failed ? 1 : 0;
}

/* hold: A's long graph sent, SENT_FILE written, then the reply awaited. */
static int cmd_hold(const char *sent_file)
{
    static struct long_graph a;
    if (long_setup(&a) != 0 || baton_submit_graph_compute(a.c, &a.g) != 0)
        return 1;
    FILE *f = fopen(sent_file, "w");
    if (!f)
        return 1;
    fclose(f);
    return baton_conn_wait(a.c) != 0; /* E_IO when the server stops */
}

int main(int argc, char **argv)
{
    static float out_alone[K * M];
    if (argc == 4 && strcmp(argv[1], "hold") == 0) {
        if (baton_net_parse_port(argv[2], &g_port) != 0 || g_port == 0)
            return 2;
        signal(SIGPIPE, SIG_IGN);
        return cmd_hold(argv[3]);
    }
    if (argc == 5 && strcmp(argv[1], "keys") == 0) {
        if (baton_net_parse_port(argv[2], &g_port) != 0 || g_port == 0)
            return 2;
        signal(SIGPIPE, SIG_IGN);
        return cmd_keys(argv[3], argv[4]);
    }
    static struct small_step b;
    int slice_ms;
    signal(SIGPIPE, SIG_IGN);
    if ((argc != 3 && argc != 4) || baton_net_parse_port(argv[1], &g_port) != 0 || g_port == 0 ||
        (slice_ms = atoi(argv[2])) <= 0 ||
        (argc == 4 && (atoi(argv[3]) < 1 || atoi(argv[3]) > N_CHAIN))) {
        fprintf(stderr, "usage: fair_compute PORT SLICE_MS [CHAIN 1..%d]\n", N_CHAIN);
        return 2;
    }
    if (argc == 4)
        g_chain = (uint32_t)atoi(argv[3]);
    check(long_setup(&g_a) == 0 && small_setup(&b) == 0, "sessions A and B set up");
    int64_t b_alone = small_run(&b);
    int64_t t_a = long_run(&g_a, out_alone);
    check(t_a > 0 && b_alone >= 0, "A's graph alone: %lld ms (%d MUL_MATs of 1.07 GFLOP); B's "
                                   "step alone: %lld ms",
          (long long)t_a, g_chain, (long long)b_alone);
    /* 8 slices of the default 10 ms: shorter, and the test means nothing */
    check(t_a >= 80, "A's graph lasts at least 8 default slices (80 ms)");

    pthread_t th;
    g_a_done = 0;
    if (pthread_create(&th, NULL, a_thread, NULL) != 0)
        return 1;
    sleep_ms((int)(t_a / 8)); /* A is well into its graph */
    struct waits wt = measure_waits(&b, a_busy);
    int64_t worst = wt.worst, sum = wt.sum;
    int steps = wt.steps, failed = wt.failed;
    pthread_join(th, NULL);
    check(failed == 0 && steps >= 1, "B's steps during A's graph: %d served, %d failed", steps,
          failed);
    printf("# B's wait during A's graph: longest %lld ms, mean %.1f ms (slice %d ms); A took "
           "%lld ms then, %lld ms alone\n",
           (long long)worst, steps ? (double)sum / steps : 0.0, slice_ms, (long long)g_busy_ms,
           (long long)t_a);
    check(steps > 0 && worst < t_a / 4,
          "B's longest wait while A computes (%lld ms) is under a quarter of A's graph (%lld ms)",
          (long long)worst, (long long)t_a);
    check(g_busy_ms > 0 && memcmp(out_alone, g_out_busy, sizeof out_alone) == 0,
          "A's result is the same bits with B's steps in between");
    int finite = 1;
    for (size_t i = 0; i < (size_t)K * M; i++)
        finite &= isfinite(out_alone[i]);
    check(finite, "A's result is finite (the chain's values stay in range)");
    baton_conn_close(b.c);
    baton_conn_close(g_a.c);
    printf("%d checks, %d failed\n", g_n, g_failed);
    return g_failed ? 1 : 0;
}
