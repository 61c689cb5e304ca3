/* Cases of registered graphs, fences and hand-offs against running batond
 * (test_pipeline_faults.sh; docs/PROTOCOL.md "Registered graphs",
 * "Asynchronous hand-off").
 *
 *   pipeline_cases fences   DST_PORT DST_PID CLIENT_KEY PEER_KEY FENCE_TIMEOUT_MS
 *   pipeline_cases handoff  SRC_PORT DST_PORT CLIENT_KEY FENCE_TIMEOUT_MS
 *   pipeline_cases midwrite DST_PORT SLOW_RELAY_PORT MARK_FILE CLIENT_KEY PEER_KEY fence|revoke
 *   pipeline_cases hog      PORT CLIENT_KEY SECONDS
 *
 * fences (one server, keys, its fence_timeout FENCE_TIMEOUT_MS):
 *   - a run fenced on a write that never comes fails with E_FENCE after the
 *     fence deadline (not before, not long after), computing nothing, while
 *     another session is served at once; its latch then refuses the next
 *     run (E_FENCE) until a run with RESET;
 *   - a PEER_WRITE with seq s lands; a run fenced on s computes exactly on
 *     those bytes (byte-exact output);
 *   - a PEER_FENCE cancelling s fails a run waiting for s at once; a write of
 *     a cancelled, older or equal seq is refused (E_FENCE) and changes no
 *     byte; a newer write makes a fence on an older seq fail at once;
 *   - a hostile peer-role connection (it holds the peer key, not the grant
 *     id) gets E_NOT_FOUND for writes and cancellations of made-up ids, and
 *     the session's fence state does not move; another client session
 *     naming the first one's grant in its fence gets E_NOT_FOUND, and so
 *     does its PEER_FENCE of that grant (the connection goes on);
 *   - the owner's PEER_FENCE (client role) voids every seq up to its own:
 *     older and equal writes are refused, a run fenced on it fails at once,
 *     a newer write lands;
 *   - a PEER_WRITE refused by its header (E_BOUNDS) changes nothing: the
 *     same seq lands afterwards; overlapping grants are refused (E_INVAL);
 *   - 4 fences whose 4th can no longer land: E_FENCE at once, and the log
 *     names fence 3 and its seq (the shell checks the line);
 *   - registered graphs: inputs (iota into an I32 leaf) and RETURN, the
 *     input checks (E_GRAPH, E_TYPE, E_BOUNDS), GRAPH_FREE, a buffer freed
 *     after registration (E_STALE_HANDLE), the per-session graph cap;
 *   - the server's threads are back to the baseline at the end.
 * handoff (two servers, SRC allow-listing DST, keys): COPY_ROUTE; a run's
 *   synchronous hand-off is done and a run fenced on it at DST computes on
 *   the bytes; an asynchronous one is queued and lands; a run that fails at
 *   SRC cancels its hand-off, so DST's fenced run fails at once (long before
 *   its fence deadline); COPY_ROUTE refusals.
 * midwrite (one server, a slow relay in front of it): a PEER_WRITE still
 *   arriving when its grant's owner sends PEER_FENCE, or REVOKE_GRANT, lands
 *   no byte after the reply: the owner's SET right after holds, then and
 *   once the write has ended (refused).
 * hog (one server): GRAPH_COMPUTEs of a 1024 x 1024 by 1024 x 64 MUL_MAT
 *   for SECONDS: another session that keeps the server's device busy.
 *
 * Prints ok / not ok lines; exit 0 iff all passed. */
#include <dirent.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/ops.h"
#include "model/graph_builder.h"
#include "wire/wire.h"

#define TIMEOUT_MS 20000
#include "keyed_util.h"
#define N 64 /* floats in the boundary buffers */

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static void sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* A session with an F32 input buffer `in` (N floats, granted), an output
 * buffer `out`, and the graph out = 2 * in registered. */
struct sess {
    struct baton_conn *c;
    uint64_t in_buf, out_buf;
    struct baton_tensor_desc in, out;
    uint8_t grant[BATON_GRANT_ID_BYTES];
    uint32_t graph;
};

static int register_scale(struct baton_conn *c, const struct baton_tensor_desc *in,
                          const struct baton_tensor_desc *out, uint32_t *id)
{
    struct baton_tensor_desc leaves[2];
    struct baton_graph_node nodes[1];
    struct baton_gb gb;
    const uint64_t ne[4] = {N, 1, 1, 1};
    uint32_t src[BATON_MAX_SRC] = {0, BATON_SRC_NONE, BATON_SRC_NONE,
                                   BATON_SRC_NONE, BATON_SRC_NONE, BATON_SRC_NONE};
    uint32_t params[BATON_N_PARAMS] = {0};
    params[0] = baton_gb_f32(2.0f);
    baton_gb_init(&gb, leaves, 2, nodes, 1);
    src[0] = baton_gb_leaf(&gb, in);
    uint32_t o = baton_gb_leaf(&gb, out);
    uint32_t n = baton_gb_node(&gb, BATON_OP_SCALE, BATON_TYPE_F32, ne, src, params);
    baton_gb_set_out(&gb, n, o);
    if (baton_gb_finish(&gb) != 0)
        return BATON_E_INVAL;
    return baton_graph_register(c, &gb.g, id);
}

static void sess_open(struct sess *s, uint16_t port, const struct baton_key *ck)
{
    memset(s, 0, sizeof *s);
    s->c = conn(port, ck, BATON_ROLE_CLIENT);
    int rc = baton_alloc_buffer(s->c, N * 4, &s->in_buf);
    if (rc == 0)
        rc = baton_alloc_buffer(s->c, N * 4, &s->out_buf);
    if (rc == 0)
        rc = baton_tensor_init(&s->in, s->in_buf, 0, BATON_TYPE_F32, N, 1, 1, 1);
    if (rc == 0)
        rc = baton_tensor_init(&s->out, s->out_buf, 0, BATON_TYPE_F32, N, 1, 1, 1);
    if (rc == 0)
        rc = baton_grant_write(s->c, s->in_buf, 0, N * 4, s->grant);
    if (rc == 0)
        rc = register_scale(s->c, &s->in, &s->out, &s->graph);
    check(rc == 0 && s->graph != 0, "session set up: buffers, grant, graph %u registered (%s)",
          s->graph, baton_status_name(rc));
}

/* A run of s's graph fenced on (grant, seq) (seq 0: no fence). */
static int run_fenced(struct baton_conn *c, uint32_t graph, const uint8_t *grant, uint64_t seq,
                      uint32_t flags)
{
    struct baton_graph_run run;
    memset(&run, 0, sizeof run);
    run.graph = graph;
    run.flags = flags;
    if (seq) {
        run.n_fences = 1;
        memcpy(run.fences[0].grant, grant, BATON_GRANT_ID_BYTES);
        run.fences[0].seq = seq;
    }
    return baton_graph_run(c, &run);
}

static void fill(float *v, float base)
{
    for (int i = 0; i < N; i++)
        v[i] = base + (float)i;
}

/* out equals 2 * v, byte for byte. */
static int out_is_double(struct sess *s, const float *v)
{
    float got[N], want[N];
    for (int i = 0; i < N; i++)
        want[i] = 2.0f * v[i];
    return baton_get_tensor(s->c, &s->out, 0, got, sizeof got) == 0 &&
           memcmp(got, want, sizeof got) == 0;
}

struct info_arg {
    uint16_t port;
    const struct baton_key *ck;
    double ms;
    int rc;
};

static void *info_thread(void *p)
{
    struct info_arg *a = p;
    sleep_ms(100); /* the fenced run is waiting by now */
    double t0 = now_ms();
    struct baton_conn *c = conn(a->port, a->ck, BATON_ROLE_CLIENT);
    struct baton_device_info d;
    a->rc = baton_device_info(c, &d);
    a->ms = now_ms() - t0;
    baton_conn_close(c);
    return NULL;
}

struct cancel_arg {
    uint16_t port;
    const struct baton_key *pk;
    const uint8_t *grant;
    uint64_t seq;
    int rc;
};

static void *cancel_thread(void *p)
{
    struct cancel_arg *a = p;
    sleep_ms(200);
    struct baton_conn *pc = conn(a->port, a->pk, BATON_ROLE_PEER);
    a->rc = baton_peer_fence(pc, a->grant, a->seq, (uint32_t)-BATON_E_FENCE);
    baton_conn_close(pc);
    return NULL;
}

static int peer_write(uint16_t port, const struct baton_key *pk, const uint8_t *grant,
                      uint64_t seq, const float *v)
{
    struct baton_conn *pc = conn(port, pk, BATON_ROLE_PEER);
    int rc = baton_peer_write(pc, grant, 0, seq, v, N * 4);
    baton_conn_close(pc);
    return rc;
}

static int cmd_fences(uint16_t port, long pid, const char *ck_path, const char *pk_path,
                      int fence_ms)
{
    struct baton_key *ck = load_key(ck_path), *pk = load_key(pk_path);
    int task0 = count_tasks(pid);
    struct sess a;
    float v[N], w[N];
    int rc;

    check(task0 > 0, "baseline: %d threads", task0);
    sess_open(&a, port, ck);

    /* a fence on a write that never comes: E_FENCE at the deadline; the
     * server goes on serving another session meanwhile */
    {
        pthread_t th;
        struct info_arg ia = {port, ck, 0, -1};
        float zero[N] = {0};
        pthread_create(&th, NULL, info_thread, &ia);
        double t0 = now_ms();
        rc = run_fenced(a.c, a.graph, a.grant, 5, 0);
        double ms = now_ms() - t0;
        pthread_join(th, NULL);
        check(rc == BATON_E_FENCE && ms >= fence_ms - 50 && ms < fence_ms + 2000,
              "a fence on a write that never comes: %s after %.0f ms (fence_timeout %d ms)",
              baton_status_name(rc), ms, fence_ms);
        check(ia.rc == 0 && ia.ms < 1000,
              "another session served while the fence waited: %s in %.0f ms",
              baton_status_name(ia.rc), ia.ms);
        check(out_is_double(&a, zero), "nothing computed: the output is still zero");
    }
    rc = run_fenced(a.c, a.graph, NULL, 0, 0);
    check(rc == BATON_E_FENCE, "the latch: the next run is refused: %s", baton_status_name(rc));
    rc = run_fenced(a.c, a.graph, NULL, 0, BATON_RUN_RESET);
    check(rc == 0, "RESET clears the latch: %s", baton_status_name(rc));

    /* a write lands; the run fenced on it computes on exactly its bytes */
    fill(v, 1.5f);
    rc = peer_write(port, pk, a.grant, 6, v);
    check(rc == 0, "PEER_WRITE seq 6: %s", baton_status_name(rc));
    rc = run_fenced(a.c, a.graph, a.grant, 6, 0);
    check(rc == 0 && out_is_double(&a, v), "run fenced on seq 6: %s, output 2 x the write",
          baton_status_name(rc));
    rc = run_fenced(a.c, a.graph, a.grant, 6, 0);
    check(rc == 0, "seq 6 still landed: a second run on it: %s", baton_status_name(rc));

    /* a cancellation fails a waiting run at once */
    {
        pthread_t th;
        struct cancel_arg ca = {port, pk, a.grant, 7, -1};
        pthread_create(&th, NULL, cancel_thread, &ca);
        double t0 = now_ms();
        rc = run_fenced(a.c, a.graph, a.grant, 7, 0);
        double ms = now_ms() - t0;
        pthread_join(th, NULL);
        check(ca.rc == 0 && rc == BATON_E_FENCE && ms < fence_ms - 100,
              "PEER_FENCE cancels seq 7: the waiting run fails at once (%s after %.0f ms)",
              baton_status_name(rc), ms);
        check(out_is_double(&a, v), "... computing nothing");
    }
    run_fenced(a.c, a.graph, NULL, 0, BATON_RUN_RESET);
    fill(w, -3.0f);
    rc = peer_write(port, pk, a.grant, 7, w);
    check(rc == BATON_E_FENCE, "a write of the cancelled seq 7 is refused: %s",
          baton_status_name(rc));
    rc = peer_write(port, pk, a.grant, 3, w);
    check(rc == BATON_E_FENCE, "a write of an older seq (3) is refused: %s", baton_status_name(rc));
    {
        float got[N];
        check(baton_get_tensor(a.c, &a.in, 0, got, sizeof got) == 0 &&
                  memcmp(got, v, sizeof got) == 0,
              "... and the granted bytes are those of seq 6");
    }
    rc = peer_write(port, pk, a.grant, 9, w);
    check(rc == 0, "a newer write (seq 9) lands: %s", baton_status_name(rc));
    double t0 = now_ms();
    rc = run_fenced(a.c, a.graph, a.grant, 8, BATON_RUN_RESET);
    check(rc == BATON_E_FENCE && now_ms() - t0 < fence_ms - 100,
          "a fence on seq 8 fails at once once seq 9 began: %s", baton_status_name(rc));
    rc = run_fenced(a.c, a.graph, a.grant, 9, BATON_RUN_RESET);
    check(rc == 0 && out_is_double(&a, w), "run fenced on seq 9: %s", baton_status_name(rc));

    /* a hostile peer: no grant id, no effect */
    {
        uint8_t made_up[BATON_GRANT_ID_BYTES];
        memcpy(made_up, a.grant, sizeof made_up);
        made_up[0] ^= 1;
        struct baton_conn *pc = conn(port, pk, BATON_ROLE_PEER);
        rc = baton_peer_fence(pc, made_up, 10, (uint32_t)-BATON_E_FENCE);
        check(rc == BATON_E_NOT_FOUND, "hostile PEER_FENCE of a made-up id: %s",
              baton_status_name(rc));
        rc = baton_peer_write(pc, made_up, 0, 10, v, N * 4);
        check(rc == BATON_E_NOT_FOUND, "hostile PEER_WRITE of a made-up id: %s",
              baton_status_name(rc));
        baton_conn_close(pc);
        rc = run_fenced(a.c, a.graph, a.grant, 9, 0);
        check(rc == 0 && out_is_double(&a, w), "the session's seq 9 still holds: %s",
              baton_status_name(rc));
    }
    /* another client session cannot wait on (or learn about) this grant */
    {
        struct sess b;
        sess_open(&b, port, ck);
        rc = run_fenced(b.c, b.graph, a.grant, 9, 0);
        check(rc == BATON_E_NOT_FOUND, "another session's fence on this grant: %s",
              baton_status_name(rc));
        rc = baton_peer_fence(b.c, a.grant, 11, (uint32_t)-BATON_E_FENCE);
        check(rc == BATON_E_NOT_FOUND && !baton_conn_is_dead(b.c),
              "another session's PEER_FENCE of this grant: %s, the connection goes on",
              baton_status_name(rc));
        baton_conn_close(b.c);
        rc = run_fenced(a.c, a.graph, a.grant, 9, 0);
        check(rc == 0, "the fence state of the first session is unchanged: %s",
              baton_status_name(rc));
    }

    /* the owner's PEER_FENCE: every seq up to 12 is void */
    rc = baton_peer_fence(a.c, a.grant, 12, (uint32_t)-BATON_E_FENCE);
    check(rc == 0, "the owner's PEER_FENCE seq 12: %s", baton_status_name(rc));
    rc = peer_write(port, pk, a.grant, 11, v);
    check(rc == BATON_E_FENCE, "... a write of seq 11 is refused: %s", baton_status_name(rc));
    rc = peer_write(port, pk, a.grant, 12, v);
    check(rc == BATON_E_FENCE, "... and of seq 12: %s", baton_status_name(rc));
    t0 = now_ms();
    rc = run_fenced(a.c, a.graph, a.grant, 12, BATON_RUN_RESET);
    check(rc == BATON_E_FENCE && now_ms() - t0 < fence_ms - 100,
          "... a run fenced on seq 12 fails at once: %s", baton_status_name(rc));
    rc = baton_peer_fence(a.c, a.grant, 12, (uint32_t)-BATON_E_FENCE);
    check(rc == BATON_E_FENCE && !baton_conn_is_dead(a.c),
          "the owner's PEER_FENCE of a seq not newer: %s", baton_status_name(rc));
    rc = peer_write(port, pk, a.grant, 13, v);
    rc = rc ? rc : run_fenced(a.c, a.graph, a.grant, 13, BATON_RUN_RESET);
    check(rc == 0 && out_is_double(&a, v), "a newer write (seq 13) lands and computes: %s",
          baton_status_name(rc));
    /* refused by its header: nothing moves */
    {
        struct baton_conn *pc = conn(port, pk, BATON_ROLE_PEER);
        rc = baton_peer_write(pc, a.grant, 4, 20, v, N * 4);
        baton_conn_close(pc);
        check(rc == BATON_E_BOUNDS, "a PEER_WRITE past its grant (seq 20): %s",
              baton_status_name(rc));
        rc = peer_write(port, pk, a.grant, 20, w);
        rc = rc ? rc : run_fenced(a.c, a.graph, a.grant, 20, 0);
        check(rc == 0 && out_is_double(&a, w), "... seq 20 then lands: %s",
              baton_status_name(rc));
    }
    /* one byte, one grant; and a run with 4 fences whose 4th cannot land */
    {
        uint64_t xb = 0, yb = 0;
        uint8_t g0[BATON_GRANT_ID_BYTES], g1[BATON_GRANT_ID_BYTES], g2[BATON_GRANT_ID_BYTES];
        uint8_t gx[BATON_GRANT_ID_BYTES];
        rc = baton_alloc_buffer(a.c, 2 * N * 4, &xb);
        rc = rc ? rc : baton_alloc_buffer(a.c, N * 4, &yb);
        rc = rc ? rc : baton_grant_write(a.c, xb, 0, N * 4, g0);
        check(rc == 0, "a grant of the first half of a buffer: %s", baton_status_name(rc));
        rc = baton_grant_write(a.c, xb, N * 2, N * 4, gx);
        check(rc == BATON_E_INVAL, "a grant overlapping it: %s", baton_status_name(rc));
        rc = baton_grant_write(a.c, xb, N * 4, N * 4, g1);
        rc = rc ? rc : baton_grant_write(a.c, yb, 0, N * 4, g2);
        check(rc == 0, "grants of the second half and of another buffer: %s",
              baton_status_name(rc));
        rc = peer_write(port, pk, g0, 1, v);
        rc = rc ? rc : peer_write(port, pk, g1, 1, v);
        struct baton_conn *pc = conn(port, pk, BATON_ROLE_PEER);
        rc = rc ? rc : baton_peer_fence(pc, g2, 77, (uint32_t)-BATON_E_FENCE);
        baton_conn_close(pc);
        struct baton_graph_run run;
        memset(&run, 0, sizeof run);
        run.graph = a.graph;
        run.flags = BATON_RUN_RESET;
        run.n_fences = 4;
        memcpy(run.fences[0].grant, a.grant, BATON_GRANT_ID_BYTES);
        run.fences[0].seq = 20;
        memcpy(run.fences[1].grant, g0, BATON_GRANT_ID_BYTES);
        run.fences[1].seq = 1;
        memcpy(run.fences[2].grant, g1, BATON_GRANT_ID_BYTES);
        run.fences[2].seq = 1;
        memcpy(run.fences[3].grant, g2, BATON_GRANT_ID_BYTES);
        run.fences[3].seq = 77;
        t0 = now_ms();
        int rr = baton_graph_run(a.c, &run);
        check(rc == 0 && rr == BATON_E_FENCE && now_ms() - t0 < fence_ms - 100,
              "4 fences, the 4th (seq 77) cancelled: %s at once (log: fence 3, seq 77)",
              baton_status_name(rr));
        run.fences[3].seq = 78;
        rc = peer_write(port, pk, g2, 78, v);
        rc = rc ? rc : baton_graph_run(a.c, &run);
        check(rc == 0 && out_is_double(&a, w), "... with the 4th landed (seq 78): %s",
              baton_status_name(rc));
        baton_free_buffer(a.c, xb);
        baton_free_buffer(a.c, yb);
    }

    /* inputs and RETURN: GET_ROWS of an F32 table {4, 8} by I32 ids {2} */
    {
        uint64_t tb = 0, ib = 0;
        struct baton_tensor_desc table, ids, rows, leaves[3];
        struct baton_graph_node nodes[1];
        struct baton_gb gb;
        float t[32], got[8];
        const uint64_t ne[4] = {4, 2, 1, 1};
        uint32_t src[BATON_MAX_SRC] = {0, 0, BATON_SRC_NONE, BATON_SRC_NONE, BATON_SRC_NONE,
                                       BATON_SRC_NONE};
        uint32_t id = 0;
        for (int i = 0; i < 32; i++)
            t[i] = (float)i * 0.25f;
        rc = baton_alloc_buffer(a.c, sizeof t, &tb);
        if (rc == 0)
            rc = baton_alloc_buffer(a.c, 64, &ib);
        if (rc == 0)
            rc = baton_tensor_init(&table, tb, 0, BATON_TYPE_F32, 4, 8, 1, 1);
        if (rc == 0)
            rc = baton_tensor_init(&ids, ib, 0, BATON_TYPE_I32, 2, 1, 1, 1);
        if (rc == 0)
            rc = baton_tensor_init(&rows, ib, 16, BATON_TYPE_F32, 4, 2, 1, 1);
        if (rc == 0)
            rc = baton_set_tensor(a.c, &table, 0, t, sizeof t);
        baton_gb_init(&gb, leaves, 3, nodes, 1);
        src[0] = baton_gb_leaf(&gb, &table);
        src[1] = baton_gb_leaf(&gb, &ids);
        uint32_t o = baton_gb_leaf(&gb, &rows);
        baton_gb_set_out(&gb, baton_gb_node(&gb, BATON_OP_GET_ROWS, BATON_TYPE_F32, ne, src,
                                            NULL),
                         o);
        if (rc == 0)
            rc = baton_gb_finish(&gb);
        if (rc == 0)
            rc = baton_graph_register(a.c, &gb.g, &id);
        check(rc == 0, "GET_ROWS graph registered: %s", baton_status_name(rc));
        struct baton_graph_run run;
        memset(&run, 0, sizeof run);
        run.graph = id;
        run.flags = BATON_RUN_RETURN;
        run.n_inputs = 1;
        run.inputs[0] = (struct baton_run_input){1, 2, 5}; /* ids = {5, 6} */
        run.ret.leaf = 2;
        run.ret_dst = got;
        run.ret_bytes = sizeof got;
        rc = baton_graph_run(a.c, &run);
        check(rc == 0 && memcmp(got, t + 20, sizeof got) == 0,
              "input ids {5, 6} and the returned rows: %s", baton_status_name(rc));
        run.flags = 0;
        run.inputs[0].leaf = 3;
        rc = baton_graph_run(a.c, &run);
        check(rc == BATON_E_GRAPH, "an input leaf past the graph's leaves: %s",
              baton_status_name(rc));
        run.inputs[0].leaf = 0;
        rc = baton_graph_run(a.c, &run);
        check(rc == BATON_E_TYPE, "an input into an F32 leaf: %s", baton_status_name(rc));
        run.inputs[0] = (struct baton_run_input){1, 3, 0};
        rc = baton_graph_run(a.c, &run);
        check(rc == BATON_E_BOUNDS, "3 inputs into a 2-element leaf: %s", baton_status_name(rc));
        run.inputs[0] = (struct baton_run_input){1, 2, 7}; /* ids {7, 8}: 8 is no row */
        run.flags = BATON_RUN_RESET;
        rc = baton_graph_run(a.c, &run);
        check(rc == BATON_E_INDEX, "an input that names no row: %s at run time",
              baton_status_name(rc));
        run.inputs[0] = (struct baton_run_input){1, 2, 0};
        rc = baton_graph_free(a.c, id);
        check(rc == 0, "GRAPH_FREE: %s", baton_status_name(rc));
        rc = baton_graph_run(a.c, &run);
        check(rc == BATON_E_NOT_FOUND, "a run of a freed graph: %s", baton_status_name(rc));
        rc = baton_graph_free(a.c, id);
        check(rc == BATON_E_NOT_FOUND, "GRAPH_FREE twice: %s", baton_status_name(rc));
        rc = baton_free_buffer(a.c, a.out_buf);
        rc = rc ? rc : run_fenced(a.c, a.graph, NULL, 0, BATON_RUN_RESET);
        check(rc == BATON_E_STALE_HANDLE, "a buffer freed after registration: %s",
              baton_status_name(rc));
    }
    /* the graph cap (max_graphs_per_session, 8 on this server) */
    {
        uint32_t id = 0, n_ok = 0;
        uint64_t ob = 0;
        struct baton_tensor_desc o;
        rc = baton_alloc_buffer(a.c, N * 4, &ob);
        if (rc == 0)
            rc = baton_tensor_init(&o, ob, 0, BATON_TYPE_F32, N, 1, 1, 1);
        for (int i = 0; rc == 0 && i < 12; i++) {
            rc = register_scale(a.c, &a.in, &o, &id);
            if (rc == 0)
                n_ok++;
            else
                break;
        }
        check(rc == BATON_E_LIMIT && n_ok == 8 - 1, /* the scale graph is held */
              "GRAPH_REGISTER past max_graphs_per_session: %s after %u more",
              baton_status_name(rc), n_ok);
    }
    baton_conn_close(a.c);
    int task1 = -1;
    for (int i = 0; i < 100; i++) {
        task1 = count_tasks(pid);
        if (task1 == task0)
            break;
        sleep_ms(20);
    }
    check(task1 == task0, "threads back to the baseline: %d (%d)", task1, task0);
    baton_key_free(ck);
    baton_key_free(pk);
    return g_failed ? 1 : 0;
}

static int cmd_handoff(uint16_t src_port, uint16_t dst_port, const char *ck_path, int fence_ms)
{
    struct baton_key *ck = load_key(ck_path);
    struct sess d; /* at the destination: granted input, out = 2 * in */
    struct sess s; /* at the source: in, out = 2 * in; out is routed to d's grant */
    struct baton_peer_dest dest;
    struct baton_tensor_desc t;
    struct baton_copy_result res;
    uint32_t route = 0;
    float v[N], v2[N], got[N];
    int rc;

    sess_open(&d, dst_port, ck);
    sess_open(&s, src_port, ck);
    memset(&dest, 0, sizeof dest);
    dest.family = BATON_PEER_FAMILY_IPV4;
    dest.addr[0] = 127;
    dest.addr[3] = 1;
    dest.port = dst_port;
    memcpy(dest.grant, d.grant, BATON_GRANT_ID_BYTES);
    rc = baton_copy_route(s.c, &s.out, &dest, &route);
    check(rc == 0 && route == 1, "source: route %u: %s", route, baton_status_name(rc));
    fill(v, 0.5f);
    for (int i = 0; i < N; i++)
        v2[i] = 2.0f * v[i]; /* what the source computes and hands off */
    rc = baton_set_tensor(s.c, &s.in, 0, v, sizeof v);

    /* synchronous hand-off: done, and the destination computes on it */
    struct baton_graph_run run;
    memset(&run, 0, sizeof run);
    run.graph = s.graph;
    run.flags = BATON_RUN_HANDOFF;
    run.handoff = (struct baton_run_handoff){route, 0, 1, N * 4};
    run.handoff_result = &res;
    rc = baton_graph_run(s.c, &run);
    check(rc == 0 && res.result == BATON_COPY_DONE, "synchronous hand-off seq 1: %s, result %u",
          baton_status_name(rc), res.result);
    rc = run_fenced(d.c, d.graph, d.grant, 1, 0);
    check(rc == 0 && out_is_double(&d, v2), "destination run fenced on seq 1: %s",
          baton_status_name(rc));

    /* asynchronous: queued at once, lands, the fence sees it */
    fill(got, 0.0f);
    baton_set_tensor(d.c, &d.in, 0, got, sizeof got); /* the slot no longer holds it */
    run.handoff = (struct baton_run_handoff){route, BATON_COPY_ASYNC, 2, N * 4};
    rc = baton_graph_run(s.c, &run);
    check(rc == 0 && res.result == BATON_COPY_QUEUED, "asynchronous hand-off seq 2: %s, result %u",
          baton_status_name(rc), res.result);
    rc = run_fenced(d.c, d.graph, d.grant, 2, 0);
    check(rc == 0 && out_is_double(&d, v2), "destination run fenced on seq 2: %s",
          baton_status_name(rc));

    /* a failing run at the source (fenced on a grant it does not have)
     * cancels its hand-off: the destination's fence fails at once */
    run.n_fences = 1;
    memset(run.fences[0].grant, 0x5a, BATON_GRANT_ID_BYTES);
    run.fences[0].seq = 1;
    run.handoff = (struct baton_run_handoff){route, BATON_COPY_ASYNC, 3, N * 4};
    rc = baton_graph_run(s.c, &run);
    check(rc == BATON_E_NOT_FOUND, "source run with a fence on no grant: %s",
          baton_status_name(rc));
    run.n_fences = 0;
    double t0 = now_ms();
    rc = run_fenced(d.c, d.graph, d.grant, 3, 0);
    double ms = now_ms() - t0;
    check(rc == BATON_E_FENCE && ms < fence_ms / 2,
          "its hand-off was cancelled: the destination's run fails at once (%s after %.0f ms)",
          baton_status_name(rc), ms);
    /* the source is latched too: its next hand-off is a cancellation */
    run.handoff = (struct baton_run_handoff){route, BATON_COPY_ASYNC, 4, N * 4};
    rc = baton_graph_run(s.c, &run);
    check(rc == BATON_E_FENCE, "the source's latch refuses its next run: %s",
          baton_status_name(rc));
    t0 = now_ms();
    rc = run_fenced(d.c, d.graph, d.grant, 4, BATON_RUN_RESET);
    check(rc == BATON_E_FENCE && now_ms() - t0 < fence_ms / 2,
          "... and cancels its hand-off seq 4 at once: %s", baton_status_name(rc));
    run.flags |= BATON_RUN_RESET;
    run.handoff = (struct baton_run_handoff){route, 0, 5, N * 4};
    rc = baton_graph_run(s.c, &run);
    check(rc == 0 && res.result == BATON_COPY_DONE, "after RESET the hand-off goes again: %s",
          baton_status_name(rc));
    rc = run_fenced(d.c, d.graph, d.grant, 5, BATON_RUN_RESET);
    check(rc == 0, "destination run fenced on seq 5: %s", baton_status_name(rc));
    rc = baton_get_tensor(d.c, &d.in, 0, got, sizeof got);
    check(rc == 0 && memcmp(got, v2, sizeof got) == 0, "seq 5's bytes are the source's result");

    /* hand-off refusals: no such route, more bytes than the route's tensor */
    run.flags = BATON_RUN_HANDOFF;
    run.handoff = (struct baton_run_handoff){route + 5, 0, 6, N * 4};
    rc = baton_graph_run(s.c, &run);
    check(rc == BATON_E_NOT_FOUND, "a hand-off to route %u (none): %s", route + 5,
          baton_status_name(rc));
    run.flags = BATON_RUN_HANDOFF | BATON_RUN_RESET;
    run.handoff = (struct baton_run_handoff){route, 0, 7, N * 4 + 4};
    rc = baton_graph_run(s.c, &run);
    check(rc == BATON_E_BOUNDS, "a hand-off of more bytes than the route's tensor: %s",
          baton_status_name(rc));
    rc = run_fenced(d.c, d.graph, d.grant, 7, BATON_RUN_RESET);
    check(rc == BATON_E_FENCE, "... whose seq 7 the destination is told will not come: %s",
          baton_status_name(rc));
    /* COPY_TENSOR_TO of a latched session is a cancellation */
    {
        struct baton_copy_options opt = {8, BATON_COPY_ASYNC};
        memset(&dest, 0, sizeof dest);
        dest.family = BATON_PEER_FAMILY_IPV4;
        dest.addr[0] = 127;
        dest.addr[3] = 1;
        dest.port = dst_port;
        memcpy(dest.grant, d.grant, BATON_GRANT_ID_BYTES);
        rc = baton_copy_tensor_to(s.c, &s.out, 0, N * 4, &dest, &opt, &res);
        check(rc == 0 && res.result == BATON_COPY_CANCELLED,
              "COPY_TENSOR_TO after a failed run: %s, result %u (cancelled)",
              baton_status_name(rc), res.result);
        rc = run_fenced(d.c, d.graph, d.grant, 8, BATON_RUN_RESET);
        check(rc == BATON_E_FENCE, "... and the destination's fence on seq 8 fails: %s",
              baton_status_name(rc));
    }

    /* COPY_ROUTE refusals */
    memset(&dest, 0, sizeof dest);
    rc = baton_copy_route(s.c, &s.out, &dest, &route);
    check(rc == BATON_E_INVAL, "COPY_ROUTE to family 0: %s", baton_status_name(rc));
    rc = baton_tensor_init(&t, s.out_buf, 64, BATON_TYPE_F32, N, 1, 1, 1);
    dest.family = BATON_PEER_FAMILY_IPV4;
    dest.port = dst_port;
    dest.addr[0] = 127;
    dest.addr[3] = 1;
    dest.grant[0] = 1;
    rc = baton_copy_route(s.c, &t, &dest, &route);
    check(rc == BATON_E_BOUNDS, "COPY_ROUTE of a tensor past its buffer: %s",
          baton_status_name(rc));
    int n_ok = 0;
    for (int i = 0; i < 20; i++) {
        rc = baton_copy_route(s.c, &s.out, &dest, &route);
        if (rc != 0)
            break;
        n_ok++;
    }
    check(rc == BATON_E_LIMIT && n_ok == 15, "COPY_ROUTE past 16 routes: %s after %d more",
          baton_status_name(rc), n_ok);
    baton_conn_close(s.c);
    baton_conn_close(d.c);
    baton_key_free(ck);
    return g_failed ? 1 : 0;
}

#define MW_BYTES (128u * 1024u)

struct mw_arg {
    uint16_t port;
    const struct baton_key *pk;
    const uint8_t *grant;
    const uint8_t *data;
    int rc;
};

static void *mw_thread(void *p)
{
    struct mw_arg *a = p;
    struct baton_conn *pc = conn(a->port, a->pk, BATON_ROLE_PEER);
    a->rc = baton_peer_write(pc, a->grant, 0, 1, a->data, MW_BYTES);
    baton_conn_close(pc);
    return NULL;
}

/* Counts bytes of buf[0..MW_BYTES) that are not `want`. */
static size_t count_not(const uint8_t *buf, uint8_t want)
{
    size_t n = 0;
    for (size_t i = 0; i < MW_BYTES; i++)
        n += buf[i] != want;
    return n;
}

/* One write through the slow relay, stopped midway by the owner (revoke
 * or PEER_FENCE); the owner's SET right after must hold. */
static void midwrite_one(struct baton_conn *c, uint16_t relay_port, const char *mark,
                         const struct baton_key *pk, int revoke)
{
    static uint8_t peer_bytes[MW_BYTES], got[MW_BYTES], own[MW_BYTES];
    uint64_t b = 0;
    uint8_t grant[BATON_GRANT_ID_BYTES];
    struct baton_tensor_desc t;
    const uint8_t fillv = revoke ? 0x22 : 0x11;
    const char *how = revoke ? "REVOKE_GRANT" : "the owner's PEER_FENCE";
    pthread_t th;
    int rc;

    memset(peer_bytes, 0xAB, sizeof peer_bytes);
    memset(own, fillv, sizeof own);
    rc = baton_alloc_buffer(c, MW_BYTES, &b);
    rc = rc ? rc : baton_tensor_init(&t, b, 0, BATON_TYPE_I32, MW_BYTES / 4, 1, 1, 1);
    rc = rc ? rc : baton_grant_write(c, b, 0, MW_BYTES, grant);
    check(rc == 0, "%s: buffer of %u bytes granted: %s", how, MW_BYTES, baton_status_name(rc));
    struct mw_arg ma = {relay_port, pk, grant, peer_bytes, -1};
    pthread_create(&th, NULL, mw_thread, &ma);
    for (int i = 0; i < 500 && access(mark, F_OK) != 0; i++)
        sleep_ms(10);
    rc = revoke ? baton_revoke_grant(c, grant) : baton_peer_fence(c, grant, 2, 1);
    int rs = baton_set_tensor(c, &t, 0, own, sizeof own);
    int rg = baton_get_tensor(c, &t, 0, got, sizeof got);
    check(access(mark, F_OK) == 0 && rc == 0 && rs == 0 && rg == 0 &&
              count_not(got, fillv) == 0,
          "%s while a PEER_WRITE is arriving: %s; the owner's SET right after holds (%zu "
          "bytes differ)",
          how, baton_status_name(rc), count_not(got, fillv));
    pthread_join(th, NULL);
    rg = baton_get_tensor(c, &t, 0, got, sizeof got);
    check(ma.rc != 0 && rg == 0 && count_not(got, fillv) == 0,
          "... the write ends refused (%s); the owner's bytes still hold (%zu differ)",
          baton_status_name(ma.rc), count_not(got, fillv));
    baton_free_buffer(c, b);
}

static int cmd_midwrite(uint16_t port, uint16_t relay_port, const char *mark, const char *ck_path,
                        const char *pk_path, int revoke)
{
    struct baton_key *ck = load_key(ck_path), *pk = load_key(pk_path);
    struct baton_conn *c = conn(port, ck, BATON_ROLE_CLIENT);
    midwrite_one(c, relay_port, mark, pk, revoke);
    baton_conn_close(c);
    baton_key_free(ck);
    baton_key_free(pk);
    return g_failed ? 1 : 0;
}

static int cmd_hog(uint16_t port, const char *ck_path, double seconds)
{
    enum { K = 1024, M = 64 };
    struct baton_key *ck = load_key(ck_path);
    struct baton_conn *c = conn(port, ck, BATON_ROLE_CLIENT);
    struct baton_tensor_desc w, x, y, leaves[3];
    struct baton_graph_node nodes[1];
    struct baton_gb gb;
    uint64_t b = 0;
    const uint64_t ne[4] = {K, M, 1, 1};
    uint32_t src[BATON_MAX_SRC] = {0, 0, BATON_SRC_NONE, BATON_SRC_NONE, BATON_SRC_NONE,
                                   BATON_SRC_NONE};
    int rc = baton_alloc_buffer(c, (uint64_t)(K * K + 2 * K * M) * 4, &b);
    rc = rc ? rc : baton_tensor_init(&w, b, 0, BATON_TYPE_F32, K, K, 1, 1);
    rc = rc ? rc : baton_tensor_init(&x, b, (uint64_t)K * K * 4, BATON_TYPE_F32, K, M, 1, 1);
    rc = rc ? rc : baton_tensor_init(&y, b, (uint64_t)(K * K + K * M) * 4, BATON_TYPE_F32, K, M,
                                     1, 1);
    baton_gb_init(&gb, leaves, 3, nodes, 1);
    src[0] = baton_gb_leaf(&gb, &w);
    src[1] = baton_gb_leaf(&gb, &x);
    uint32_t o = baton_gb_leaf(&gb, &y);
    baton_gb_set_out(&gb, baton_gb_node(&gb, BATON_OP_MUL_MAT, BATON_TYPE_F32, ne, src, NULL), o);
    rc = rc ? rc : baton_gb_finish(&gb);
    double t0 = now_ms();
    int n = 0;
    while (rc == 0 && now_ms() - t0 < seconds * 1e3) {
        rc = baton_graph_compute(c, &gb.g);
        n++;
    }
    fprintf(stderr, "hog: %d graphs in %.1f s: %s\n", n, (now_ms() - t0) / 1e3,
            baton_status_name(rc));
    baton_conn_close(c);
    baton_key_free(ck);
    return rc == 0 ? 0 : 1;
}

int main(int argc, char **argv)
{
    if (argc == 8 && strcmp(argv[1], "midwrite") == 0)
        return cmd_midwrite((uint16_t)atoi(argv[2]), (uint16_t)atoi(argv[3]), argv[4], argv[5],
                            argv[6], strcmp(argv[7], "revoke") == 0);
    if (argc == 5 && strcmp(argv[1], "hog") == 0)
        return cmd_hog((uint16_t)atoi(argv[2]), argv[3], atof(argv[4]));
    if (argc == 7 && strcmp(argv[1], "fences") == 0)
        return cmd_fences((uint16_t)atoi(argv[2]), atol(argv[3]), argv[4], argv[5],
                          atoi(argv[6]));
    if (argc == 6 && strcmp(argv[1], "handoff") == 0)
        return cmd_handoff((uint16_t)atoi(argv[2]), (uint16_t)atoi(argv[3]), argv[4],
                           atoi(argv[5]));
    fprintf(stderr, "usage: pipeline_cases fences DST_PORT DST_PID CLIENT_KEY PEER_KEY "
                    "FENCE_TIMEOUT_MS | handoff SRC_PORT DST_PORT CLIENT_KEY FENCE_TIMEOUT_MS | "
                    "midwrite DST_PORT SLOW_RELAY_PORT MARK_FILE CLIENT_KEY PEER_KEY fence|revoke | "
                    "hog PORT "
                    "CLIENT_KEY SECONDS\n");
    return 2;
}
