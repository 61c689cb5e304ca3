/* peer_cases: direct-path cases against running keyed batond servers
 * (started by tests/integration/test_direct_*.sh with --key and --peer-key).
 *
 *   peer_cases grants   PORT CLIENT_KEY PEER_KEY
 *   peer_cases inflight PORT RELAY_PORT MARK_FILE CLIENT_KEY PEER_KEY
 *   peer_cases flood    SRC_PORT SRC_PID CLIENT_KEY N ALLOWED_DEAD_PORT STALL_PORT
 *   peer_cases retry    SRC_PORT RELAY_PORT DEST_PORT CLIENT_KEY STEP_FILE GO_FILE
 *   peer_cases links    SRC_PORT DEST1_PORT DEST2_PORT CLIENT_KEY
 *   peer_cases keylinks SRC_PORT DEST1_PORT DEST2_PORT CLIENT_KEY
 *
 * grants: GRANT_WRITE / REVOKE_GRANT and every refused PEER_WRITE (no
 * grant, revoked, past the range, after FREE_BUFFER, another buffer's,
 * on a client-role connection), each followed by a byte-exact check that
 * the destination's buffers are unchanged; a valid PEER_WRITE lands
 * exactly where granted; grant limits and malformed requests.
 * inflight: a PEER_WRITE of 4 MiB through a slow relay; FREE_BUFFER of its
 * destination while it is in flight (once the relay has passed MARK_FILE's
 * threshold); the write completes into the pinned buffer, the server keeps
 * serving, and the memory comes back.
 * flood: N COPY_TENSOR_TO that cannot be done (not on the allow-list, an
 * allowed port nobody listens on, a relay that stalls), all answered "not
 * done"; the source's descriptors and threads (/proc/SRC_PID) equal the
 * baseline afterwards.
 * retry: a copy through a relay is done; the test script kills the relay
 * and starts it again on the same port (STEP_FILE / GO_FILE hand-shake);
 * the next copy is done on a fresh link (the stale cached link is retried
 * once, at once) and the bytes arrive; so do those of a small asynchronous
 * copy of a second session, whose cached link went stale too.
 * links: max_peer_links_per_session (cmd_links); keylinks: a named client
 * key's max_peer_links (cmd_keylinks).
 *
 * Prints ok / not ok lines; exit 0 iff all passed. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "wire/wire.h"

#define TIMEOUT_MS 10000
#include "keyed_util.h"

static void sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static int wait_file(const char *path, int ms)
{
    struct stat st;
    for (int i = 0; i < ms / 10; i++) {
        if (stat(path, &st) == 0)
            return 0;
        sleep_ms(10);
    }
    return -1;
}

static void touch(const char *path)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
    if (fd >= 0)
        close(fd);
}

/* The whole buffer h (n bytes, I32 view) equals want. */
static int buffer_is(struct baton_conn *c, uint64_t h, const uint8_t *want, size_t n)
{
    struct baton_tensor_desc t;
    uint8_t *got = malloc(n);
    int ok = got && baton_tensor_init(&t, h, 0, BATON_TYPE_I32, n / 4, 1, 1, 1) == 0 &&
             baton_get_tensor(c, &t, 0, got, n) == 0 && memcmp(got, want, n) == 0;
    free(got);
    return ok;
}

/* Sequence numbers of PEER_WRITE / COPY_TENSOR_TO: every write into a
 * grant must be newer than the last; one counter for the whole run keeps
 * them so. */
static uint64_t g_seq;

static uint64_t next_seq(void)
{
    return __atomic_add_fetch(&g_seq, 1, __ATOMIC_RELAXED);
}

static int fill(struct baton_conn *c, uint64_t h, const uint8_t *data, size_t n)
{
    struct baton_tensor_desc t;
    int rc = baton_tensor_init(&t, h, 0, BATON_TYPE_I32, n / 4, 1, 1, 1);
    return rc ? rc : baton_set_tensor(c, &t, 0, data, n);
}

/* One PEER_WRITE on a fresh peer link; the link is closed afterwards. */
static int peer_write_once(uint16_t port, const struct baton_key *pk, const uint8_t *id,
                           uint64_t off, const void *data, uint64_t n)
{
    struct baton_conn *p = conn(port, pk, BATON_ROLE_PEER);
    int rc = baton_peer_write(p, id, off, next_seq(), data, n);
    baton_conn_close(p);
    return rc;
}

/* ---- grants ---- */

static int cmd_grants(uint16_t port, const char *ck_path, const char *pk_path)
{
    struct baton_key *ck = load_key(ck_path), *pk = load_key(pk_path);
    struct baton_conn *c = conn(port, ck, BATON_ROLE_CLIENT);
    struct baton_conn *c2 = conn(port, ck, BATON_ROLE_CLIENT);
    enum { N = 256 };
    uint8_t x[N], w[N], data[N], id[BATON_GRANT_ID_BYTES], id2[BATON_GRANT_ID_BYTES],
        id3[BATON_GRANT_ID_BYTES], junk[BATON_GRANT_ID_BYTES];
    uint64_t hx = 0, hw = 0, hy = 0, hz = 0;
    int rc;

    check(baton_conn_server_hello(c)->features & BATON_FEATURE_PEER_COPY,
          "a server with the peer key advertises PEER_COPY");
    for (int i = 0; i < N; i++) {
        x[i] = (uint8_t)(i * 7 + 1);
        w[i] = (uint8_t)(255 - i);
        data[i] = 0xA5;
    }
    check(baton_alloc_buffer(c, N, &hx) == 0 && fill(c, hx, x, N) == 0, "buffer X filled");
    check(baton_alloc_buffer(c, N, &hw) == 0 && fill(c, hw, w, N) == 0, "buffer W filled");

    /* a valid grant and write land exactly in [64 + 8, 64 + 8 + 16) */
    rc = baton_grant_write(c, hx, 64, 64, id);
    check(rc == 0, "GRANT_WRITE X [64, 128): %s", baton_status_name(rc));
    rc = peer_write_once(port, pk, id, 8, data, 16);
    check(rc == 0, "PEER_WRITE inside the grant: %s", baton_status_name(rc));
    memset(x + 72, 0xA5, 16);
    check(buffer_is(c, hx, x, N), "X holds the written bytes, and only those");
    check(buffer_is(c, hw, w, N), "W unchanged");

    /* refusals: the destination's bytes stay as they are */
    memset(junk, 0x5A, sizeof junk);
    rc = peer_write_once(port, pk, junk, 0, data, 16);
    check(rc == BATON_E_NOT_FOUND, "PEER_WRITE without a grant: %s", baton_status_name(rc));
    rc = peer_write_once(port, pk, id, 60, data, 8);
    check(rc == BATON_E_BOUNDS, "PEER_WRITE past the grant's end: %s", baton_status_name(rc));
    rc = peer_write_once(port, pk, id, 0, data, 65);
    check(rc == BATON_E_BOUNDS, "PEER_WRITE longer than the grant: %s", baton_status_name(rc));
    rc = peer_write_once(port, pk, id, UINT64_MAX - 3, data, 8);
    check(rc == BATON_E_BOUNDS, "PEER_WRITE with a wrapping offset: %s", baton_status_name(rc));
    check(buffer_is(c, hx, x, N) && buffer_is(c, hw, w, N), "X and W unchanged by the refusals");

    /* a refused PEER_WRITE ends its link */
    {
        struct baton_conn *p = conn(port, pk, BATON_ROLE_PEER);
        rc = baton_peer_write(p, junk, 0, next_seq(), data, 4);
        int rc2 = baton_peer_write(p, id, 0, next_seq(), data, 4);
        check(rc == BATON_E_NOT_FOUND && rc2 == BATON_E_IO,
              "after a refusal the link is closed (%s, then %s)", baton_status_name(rc),
              baton_status_name(rc2));
        baton_conn_close(p);
    }
    check(buffer_is(c, hx, x, N), "X unchanged after the closed link");

    /* another session can neither revoke nor use this session's buffers */
    rc = baton_revoke_grant(c2, id);
    check(rc == BATON_E_NOT_FOUND, "REVOKE_GRANT from another session: %s",
          baton_status_name(rc));
    rc = baton_grant_write(c2, hx, 0, 16, id2);
    check(rc == BATON_E_NOT_OWNED, "GRANT_WRITE on another session's buffer: %s",
          baton_status_name(rc));
    rc = peer_write_once(port, pk, id, 0, data, 4);
    memset(x + 64, 0xA5, 4);
    check(rc == 0 && buffer_is(c, hx, x, N), "the grant survived the other session's revoke");

    /* revoked */
    rc = baton_revoke_grant(c, id);
    check(rc == 0, "REVOKE_GRANT: %s", baton_status_name(rc));
    rc = baton_revoke_grant(c, id);
    check(rc == BATON_E_NOT_FOUND, "REVOKE_GRANT twice: %s", baton_status_name(rc));
    rc = peer_write_once(port, pk, id, 0, data, 4);
    check(rc == BATON_E_NOT_FOUND, "PEER_WRITE with a revoked grant: %s", baton_status_name(rc));
    check(buffer_is(c, hx, x, N), "X unchanged");

    /* after FREE_BUFFER, and with that buffer's grant once another buffer
     * took its slot */
    uint8_t y[N];
    memset(y, 0x11, N);
    check(baton_alloc_buffer(c, N, &hy) == 0 && fill(c, hy, y, N) == 0, "buffer Y filled");
    rc = baton_grant_write(c, hy, 0, N, id3);
    check(rc == 0, "GRANT_WRITE Y: %s", baton_status_name(rc));
    check(baton_free_buffer(c, hy) == 0, "FREE_BUFFER Y");
    rc = peer_write_once(port, pk, id3, 0, data, 16);
    check(rc == BATON_E_NOT_FOUND, "PEER_WRITE after FREE_BUFFER: %s", baton_status_name(rc));
    rc = baton_alloc_buffer(c, N, &hz);
    check(rc == 0 && (hz & 0xFFFFFFFFu) == (hy & 0xFFFFFFFFu) && hz != hy,
          "buffer Z takes Y's slot with a new generation");
    rc = peer_write_once(port, pk, id3, 0, data, 16);
    uint8_t zero[N];
    memset(zero, 0, N);
    check(rc == BATON_E_NOT_FOUND && buffer_is(c, hz, zero, N),
          "PEER_WRITE with the freed buffer's grant: %s, Z still zero", baton_status_name(rc));
    check(buffer_is(c, hx, x, N) && buffer_is(c, hw, w, N), "X and W unchanged");

    /* a grant reaches its own buffer only: W's neighbour X is never hit */
    rc = baton_grant_write(c, hw, 0, N, id2);
    check(rc == 0, "GRANT_WRITE W (whole)");
    rc = peer_write_once(port, pk, id2, N, data, 1);
    check(rc == BATON_E_BOUNDS && buffer_is(c, hx, x, N) && buffer_is(c, hw, w, N),
          "PEER_WRITE one past W's grant: %s; X and W unchanged", baton_status_name(rc));

    /* on a client-role connection PEER_WRITE is not allowed at all */
    {
        struct baton_conn *c3 = conn(port, ck, BATON_ROLE_CLIENT);
        rc = baton_peer_write(c3, id2, 0, next_seq(), data, 16);
        check(rc == BATON_E_PROTO, "PEER_WRITE on a client connection: %s",
              baton_status_name(rc));
        baton_conn_close(c3);
    }
    check(buffer_is(c, hw, w, N), "W unchanged");

    /* malformed grants and copies are error replies; the connection goes on */
    rc = baton_grant_write(c, hx, 0, 0, id2);
    check(rc == BATON_E_INVAL, "GRANT_WRITE of 0 bytes: %s", baton_status_name(rc));
    rc = baton_grant_write(c, hx, 200, 57, id2);
    check(rc == BATON_E_BOUNDS, "GRANT_WRITE past the buffer: %s", baton_status_name(rc));
    rc = baton_grant_write(c, hx, UINT64_MAX, 2, id2);
    check(rc == BATON_E_OVERFLOW, "GRANT_WRITE with a wrapping range: %s", baton_status_name(rc));
    rc = baton_grant_write(c, hx | 0xFFFF00000000ull, 0, 4, id2);
    check(rc == BATON_E_STALE_HANDLE, "GRANT_WRITE on a stale handle: %s", baton_status_name(rc));
    memset(junk, 0, sizeof junk);
    rc = baton_revoke_grant(c, junk);
    check(rc == BATON_E_INVAL, "REVOKE_GRANT of the zero id: %s", baton_status_name(rc));
    {
        struct baton_tensor_desc t;
        struct baton_peer_dest d;
        struct baton_copy_result res;
        memset(&d, 0, sizeof d);
        d.family = 5;
        d.port = 1;
        d.grant[0] = 1;
        baton_tensor_init(&t, hx, 0, BATON_TYPE_I32, 16, 1, 1, 1);
        rc = baton_copy_tensor_to(c, &t, 0, 64, &d, &(struct baton_copy_options){next_seq(), 0}, &res);
        check(rc == BATON_E_INVAL, "COPY_TENSOR_TO to family 5: %s", baton_status_name(rc));
        d.family = BATON_PEER_FAMILY_IPV4;
        d.addr[5] = 1;
        rc = baton_copy_tensor_to(c, &t, 0, 64, &d, &(struct baton_copy_options){next_seq(), 0}, &res);
        check(rc == BATON_E_INVAL, "COPY_TENSOR_TO with IPv4 padding set: %s",
              baton_status_name(rc));
        d.addr[5] = 0;
        rc = baton_copy_tensor_to(c, &t, 0, 65, &d, &(struct baton_copy_options){next_seq(), 0}, &res);
        check(rc == BATON_E_BOUNDS, "COPY_TENSOR_TO past the tensor: %s", baton_status_name(rc));
        d.addr[0] = 127;
        d.addr[3] = 1;
        rc = baton_copy_tensor_to(c, &t, 0, 64, &d, &(struct baton_copy_options){next_seq(), 0}, &res);
        check(rc == 0 && res.result == BATON_COPY_NOT_ALLOWED,
              "COPY_TENSOR_TO to an address not on the allow-list: not done (%u)",
              (unsigned)res.result);
        memset(&d, 0, sizeof d);
        rc = baton_copy_tensor_to(c, &t, 0, 0, &d, NULL, &res);
        check(rc == 0 && res.result == BATON_COPY_DONE && res.peer_bytes_received ==
                                                               (24 + 40 + 16 + 16) +
                                                                   (24 + 40 + 4 + 16),
              "counter query: %s, received %llu bytes into this session's grants",
              baton_status_name(rc), (unsigned long long)res.peer_bytes_received);
    }
    /* the per-session cap (the script starts the server with
     * --max-grants-per-session 3; W's grant is the one live grant) */
    {
        uint8_t ids[8][BATON_GRANT_ID_BYTES];
        int n_ok = 0;
        /* grants never overlap: 4 bytes each, apart from W's */
        while (n_ok < 8 && (rc = baton_grant_write(c, hx, 4u * (uint64_t)n_ok, 4, ids[n_ok])) == 0)
            n_ok++;
        check(n_ok == 2 && rc == BATON_E_LIMIT, "grants up to the cap of 3, then %s",
              baton_status_name(rc));
        rc = baton_grant_write(c2, hx, 0, 4, id3);
        uint64_t h2;
        int rc2 = baton_alloc_buffer(c2, 64, &h2);
        int n2 = 0;
        while (rc2 == 0 && n2 < 8 && baton_grant_write(c2, h2, 4u * (uint64_t)n2, 4, id3) == 0)
            n2++;
        check(rc == BATON_E_NOT_OWNED && n2 == 3, "the cap is per session (other session: %d)",
              n2);
        check(n_ok == 2 && baton_revoke_grant(c, ids[0]) == 0 &&
                  baton_grant_write(c, hx, 0, 4, ids[0]) == 0,
              "a revoked grant frees its place");
    }
    check(baton_device_info(c, &(struct baton_device_info){0}) == 0, "the session still works");
    baton_conn_close(c2);
    baton_conn_close(c);
    baton_key_free(ck);
    baton_key_free(pk);
    return g_failed ? 1 : 0;
}

/* ---- inflight ---- */

struct writer {
    uint16_t port;
    const struct baton_key *pk;
    uint8_t id[BATON_GRANT_ID_BYTES];
    const uint8_t *data;
    uint64_t n;
    int rc;
};

static void *writer_main(void *arg)
{
    struct writer *w = arg;
    struct baton_conn *p = NULL;
    struct baton_conn_options o = {.timeout_ms = 60000, .key = w->pk, .role = BATON_ROLE_PEER};
    w->rc = baton_conn_connect_ex("127.0.0.1", w->port, &o, &p);
    if (w->rc == 0)
        w->rc = baton_peer_write(p, w->id, 0, next_seq(), w->data, w->n);
    baton_conn_close(p);
    return NULL;
}

static int cmd_inflight(uint16_t port, uint16_t relay_port, const char *mark, const char *ck_path,
                        const char *pk_path)
{
    struct baton_key *ck = load_key(ck_path), *pk = load_key(pk_path);
    struct baton_conn *c = conn(port, ck, BATON_ROLE_CLIENT);
    const uint64_t n = 4u << 20;
    uint8_t *data = malloc(n);
    struct baton_device_info before, after;
    struct writer w = {.port = relay_port, .pk = pk, .data = data, .n = n};
    pthread_t t;
    uint64_t h = 0;
    int rc;

    for (uint64_t i = 0; i < n; i++)
        data[i] = (uint8_t)(i * 31 + 7);
    check(baton_device_info(c, &before) == 0, "DEVICE_INFO before");
    check(baton_alloc_buffer(c, n, &h) == 0, "4 MiB buffer");
    rc = baton_grant_write(c, h, 0, n, w.id);
    check(rc == 0, "GRANT_WRITE of the whole buffer: %s", baton_status_name(rc));
    pthread_create(&t, NULL, writer_main, &w);
    /* the relay creates `mark` once 1 MiB has passed: the write is in flight */
    check(wait_file(mark, 30000) == 0, "the PEER_WRITE is in flight");
    rc = baton_free_buffer(c, h);
    check(rc == 0, "FREE_BUFFER while the PEER_WRITE lands in it: %s", baton_status_name(rc));
    rc = baton_device_info(c, &after);
    check(rc == 0 && after.free_memory < before.free_memory,
          "the freed buffer stays counted while pinned (free %llu, before %llu)",
          (unsigned long long)after.free_memory, (unsigned long long)before.free_memory);
    pthread_join(t, NULL);
    check(w.rc == 0 || w.rc == BATON_E_NOT_FOUND || w.rc == BATON_E_STALE_HANDLE,
          "the in-flight PEER_WRITE ended: %s", baton_status_name(w.rc));
    /* the last pin went: the memory comes back */
    int back = 0;
    for (int i = 0; i < 200 && !back; i++) {
        back = baton_device_info(c, &after) == 0 && after.free_memory == before.free_memory;
        if (!back)
            sleep_ms(20);
    }
    check(back, "memory back after the write (free %llu, before %llu)",
          (unsigned long long)after.free_memory, (unsigned long long)before.free_memory);
    /* and the grant went with the buffer */
    rc = peer_write_once(port, pk, w.id, 0, data, 16);
    check(rc == BATON_E_NOT_FOUND, "the freed buffer's grant is gone: %s", baton_status_name(rc));
    baton_conn_close(c);
    free(data);
    baton_key_free(ck);
    baton_key_free(pk);
    return g_failed ? 1 : 0;
}

/* ---- flood ---- */

static void counts(long pid, int *fds, int *tasks)
{
    char p[64];
    snprintf(p, sizeof p, "/proc/%ld/fd", pid);
    *fds = count_dir(p);
    snprintf(p, sizeof p, "/proc/%ld/task", pid);
    *tasks = count_dir(p);
}

static int cmd_flood(uint16_t src_port, long src_pid, const char *ck_path, int n_copies,
                     uint16_t dead_port, uint16_t stall_port)
{
    struct baton_key *ck = load_key(ck_path);
    struct baton_conn *c = conn(src_port, ck, BATON_ROLE_CLIENT);
    struct baton_tensor_desc t;
    struct baton_copy_result res;
    uint64_t h = 0, outcomes[BATON_COPY_OUTCOME_LIMIT] = {0};
    int fd0, task0, fd1, task1, errors = 0;
    const uint16_t ports[3] = {1, dead_port, stall_port}; /* port 1: not on the list */

    check(baton_alloc_buffer(c, 256, &h) == 0 &&
              baton_tensor_init(&t, h, 0, BATON_TYPE_F32, 64, 1, 1, 1) == 0,
          "source buffer");
    counts(src_pid, &fd0, &task0);
    check(fd0 > 0 && task0 > 0, "baseline: %d descriptors, %d threads", fd0, task0);
    for (int i = 0; i < n_copies; i++) {
        struct baton_peer_dest d;
        memset(&d, 0, sizeof d);
        d.family = BATON_PEER_FAMILY_IPV4;
        d.addr[0] = 127;
        d.addr[3] = 1;
        d.port = ports[i % 3];
        memset(d.grant, 0x42, sizeof d.grant);
        int rc = baton_copy_tensor_to(c, &t, 0, 256, &d, &(struct baton_copy_options){next_seq(), 0}, &res);
        if (rc != 0)
            errors++;
        else if (res.result < BATON_COPY_OUTCOME_LIMIT)
            outcomes[res.result]++;
    }
    check(errors == 0 && outcomes[BATON_COPY_DONE] == 0,
          "%d copies: no error reply, none done (not allowed %llu, backoff %llu, unreachable "
          "%llu, handshake %llu, io %llu)",
          n_copies, (unsigned long long)outcomes[BATON_COPY_NOT_ALLOWED],
          (unsigned long long)outcomes[BATON_COPY_BACKOFF],
          (unsigned long long)outcomes[BATON_COPY_UNREACHABLE],
          (unsigned long long)outcomes[BATON_COPY_HANDSHAKE],
          (unsigned long long)outcomes[BATON_COPY_IO]);
    check(outcomes[BATON_COPY_NOT_ALLOWED] == (uint64_t)(n_copies + 2) / 3,
          "every copy to the unlisted port refused without dialling");
    check(outcomes[BATON_COPY_UNREACHABLE] + outcomes[BATON_COPY_HANDSHAKE] >= 1 &&
              outcomes[BATON_COPY_BACKOFF] >= (uint64_t)n_copies / 2 &&
              outcomes[BATON_COPY_UNREACHABLE] + outcomes[BATON_COPY_HANDSHAKE] +
                      outcomes[BATON_COPY_BACKOFF] + outcomes[BATON_COPY_IO] ==
                  (uint64_t)n_copies - outcomes[BATON_COPY_NOT_ALLOWED],
          "failed dials enter the backoff table: most allowed copies are not even dialled");
    check(res.copies_not_done >= (uint64_t)n_copies && res.copies_done == 0 &&
              res.peer_bytes_sent == 0,
          "the session's counters: %llu not done", (unsigned long long)res.copies_not_done);
    counts(src_pid, &fd1, &task1);
    check(fd1 == fd0 && task1 == task0, "after: %d descriptors (baseline %d), %d threads (%d)",
          fd1, fd0, task1, task0);
    check(baton_device_info(c, &(struct baton_device_info){0}) == 0, "the source still serves");
    baton_conn_close(c);
    baton_key_free(ck);
    return g_failed ? 1 : 0;
}

/* ---- retry ---- */

static int copy_and_check(struct baton_conn *src, struct baton_conn *dst,
                          const struct baton_tensor_desc *ts, uint64_t hd,
                          const struct baton_peer_dest *d, uint8_t seed, struct baton_copy_result *res)
{
    uint8_t v[256];
    for (int i = 0; i < 256; i++)
        v[i] = (uint8_t)(i + seed);
    if (baton_set_tensor(src, ts, 0, v, sizeof v) != 0)
        return 0;
    if (baton_copy_tensor_to(src, ts, 0, sizeof v, d, &(struct baton_copy_options){next_seq(), 0}, res) != 0 || res->result != BATON_COPY_DONE)
        return 0;
    return buffer_is(dst, hd, v, sizeof v);
}

static int cmd_retry(uint16_t src_port, uint16_t relay_port, uint16_t dst_port,
                     const char *ck_path, const char *step_file, const char *go_file)
{
    struct baton_key *ck = load_key(ck_path);
    struct baton_conn *src = conn(src_port, ck, BATON_ROLE_CLIENT);
    struct baton_conn *src2 = conn(src_port, ck, BATON_ROLE_CLIENT);
    struct baton_conn *dst = conn(dst_port, ck, BATON_ROLE_CLIENT);
    struct baton_tensor_desc ts, ts2;
    struct baton_peer_dest d, d2;
    struct baton_copy_result res, res2;
    uint64_t hs = 0, hd = 0, hs2 = 0, hd2 = 0;
    uint8_t v[256];
    int landed = 0;

    memset(&d, 0, sizeof d);
    check(baton_alloc_buffer(src, 256, &hs) == 0 && baton_alloc_buffer(dst, 256, &hd) == 0 &&
              baton_tensor_init(&ts, hs, 0, BATON_TYPE_I32, 64, 1, 1, 1) == 0 &&
              baton_grant_write(dst, hd, 0, 256, d.grant) == 0,
          "buffers and grant");
    d.family = BATON_PEER_FAMILY_IPV4;
    d.addr[0] = 127;
    d.addr[3] = 1;
    d.port = relay_port;
    /* a second session, whose link through the relay goes stale too */
    d2 = d;
    check(baton_alloc_buffer(src2, 256, &hs2) == 0 && baton_alloc_buffer(dst, 256, &hd2) == 0 &&
              baton_tensor_init(&ts2, hs2, 0, BATON_TYPE_I32, 64, 1, 1, 1) == 0 &&
              baton_grant_write(dst, hd2, 0, 256, d2.grant) == 0,
          "the second session's buffers and grant");
    check(copy_and_check(src, dst, &ts, hd, &d, 1, &res), "copy through the relay: done");
    check(copy_and_check(src, dst, &ts, hd, &d, 2, &res), "again, on the cached link");
    check(copy_and_check(src2, dst, &ts2, hd2, &d2, 11, &res2),
          "the second session's copy through the relay: done");
    touch(step_file);
    check(wait_file(go_file, 20000) == 0, "the relay was restarted");
    check(copy_and_check(src, dst, &ts, hd, &d, 3, &res),
          "after the relay restarted: done at once on a fresh link (result %u, status %u)",
          (unsigned)res.result, (unsigned)res.status);
    check(res.copies_done == 3 && res.copies_not_done == 0,
          "three copies done, none not done");
    /* an asynchronous copy small enough to be sent by the connection
     * thread itself: the link closed at the other end is found before a
     * byte goes (its bytes would be lost, and a run fenced on them would
     * wait for fence_timeout), and the sender dials a fresh one */
    for (int i = 0; i < 256; i++)
        v[i] = (uint8_t)(i + 12);
    memset(&res2, 0, sizeof res2);
    landed = baton_set_tensor(src2, &ts2, 0, v, sizeof v) == 0 &&
             baton_copy_tensor_to(src2, &ts2, 0, sizeof v, &d2,
                                  &(struct baton_copy_options){next_seq(), BATON_COPY_ASYNC},
                                  &res2) == 0;
    check(landed && res2.result == BATON_COPY_QUEUED,
          "after the relay restarted: an asynchronous copy is queued (result %u)",
          (unsigned)res2.result);
    landed = 0;
    for (int i = 0; i < 300 && !landed; i++) {
        landed = buffer_is(dst, hd2, v, sizeof v);
        if (!landed)
            sleep_ms(10);
    }
    check(landed, "... and lands, through a fresh link");
    baton_conn_close(src);
    baton_conn_close(src2);
    baton_conn_close(dst);
    baton_key_free(ck);
    return g_failed ? 1 : 0;
}

/* ---- links ---- */

/* Copies 256 bytes from a new buffer of src to a granted buffer of dst on
 * port; returns the copy's result (BATON_COPY_*), -1 when it could not be
 * asked; *landed says whether the bytes arrived. */
static int copy_to(struct baton_conn *src, struct baton_conn *dst, uint16_t port, uint8_t seed,
                   int *landed)
{
    struct baton_tensor_desc ts;
    struct baton_peer_dest d;
    struct baton_copy_result res;
    uint64_t hs = 0, hd = 0;
    uint8_t v[256];
    memset(&d, 0, sizeof d);
    for (int i = 0; i < 256; i++)
        v[i] = (uint8_t)(i * 3 + seed);
    *landed = 0;
    if (baton_alloc_buffer(src, 256, &hs) != 0 || baton_alloc_buffer(dst, 256, &hd) != 0 ||
        baton_tensor_init(&ts, hs, 0, BATON_TYPE_I32, 64, 1, 1, 1) != 0 ||
        baton_grant_write(dst, hd, 0, 256, d.grant) != 0 ||
        baton_set_tensor(src, &ts, 0, v, sizeof v) != 0)
        return -1;
    d.family = BATON_PEER_FAMILY_IPV4;
    d.addr[0] = 127;
    d.addr[3] = 1;
    d.port = port;
    if (baton_copy_tensor_to(src, &ts, 0, sizeof v, &d,
                             &(struct baton_copy_options){next_seq(), 0}, &res) != 0)
        return -1;
    *landed = buffer_is(dst, hd, v, sizeof v);
    return (int)res.result;
}

/* links: the source (started with max_peer_links_per_session 1 and both
 * destinations on its allow-list) gives one session one link: its copy to
 * the first destination is done, to the second "not done" (LIMIT), nothing
 * landing; another session's copy to the second is done (the server-wide
 * pool was not used up by the first); the first session's link still
 * works. */
/* Two client sessions a, b on the source and one on each destination. */
struct link_case {
    struct baton_key *ck;
    struct baton_conn *a, *b, *d1, *d2;
};

static void link_case_open(struct link_case *lc, uint16_t src_port, uint16_t d1_port,
                           uint16_t d2_port, const char *ck_path)
{
    lc->ck = load_key(ck_path);
    lc->a = conn(src_port, lc->ck, BATON_ROLE_CLIENT);
    lc->b = conn(src_port, lc->ck, BATON_ROLE_CLIENT);
    lc->d1 = conn(d1_port, lc->ck, BATON_ROLE_CLIENT);
    lc->d2 = conn(d2_port, lc->ck, BATON_ROLE_CLIENT);
}

static int link_case_close(struct link_case *lc)
{
    baton_conn_close(lc->a);
    baton_conn_close(lc->b);
    baton_conn_close(lc->d1);
    baton_conn_close(lc->d2);
    baton_key_free(lc->ck);
    return g_failed ? 1 : 0;
}

static int cmd_links(uint16_t src_port, uint16_t d1_port, uint16_t d2_port, const char *ck_path)
{
    struct link_case lc;
    link_case_open(&lc, src_port, d1_port, d2_port, ck_path);
    struct baton_conn *a = lc.a, *b = lc.b, *d1 = lc.d1, *d2 = lc.d2;
    int landed, r;
    r = copy_to(a, d1, d1_port, 1, &landed);
    check(r == BATON_COPY_DONE && landed, "session A to the first destination: done (%d)", r);
    r = copy_to(a, d2, d2_port, 2, &landed);
    check(r == BATON_COPY_LIMIT && !landed,
          "session A to a second destination: not done at its one link (result %d, want %d)", r,
          BATON_COPY_LIMIT);
    r = copy_to(b, d2, d2_port, 3, &landed);
    check(r == BATON_COPY_DONE && landed, "session B to the second destination: done (%d)", r);
    r = copy_to(a, d1, d1_port, 4, &landed);
    check(r == BATON_COPY_DONE && landed, "session A's own link still works (%d)", r);
    return link_case_close(&lc);
}

/* keylinks: the source holds the client key only as a named client with
 * max_peer_links=1: session A's copy to the first destination is done;
 * session B, of the same key, cannot open a second link while A's is open
 * (LIMIT, nothing lands); once A has closed (its link with it), B's copy
 * is done. */
static int cmd_keylinks(uint16_t src_port, uint16_t d1_port, uint16_t d2_port, const char *ck_path)
{
    struct link_case lc;
    link_case_open(&lc, src_port, d1_port, d2_port, ck_path);
    struct baton_conn *a = lc.a, *b = lc.b, *d1 = lc.d1, *d2 = lc.d2;
    int landed, r;
    r = copy_to(a, d1, d1_port, 5, &landed);
    check(r == BATON_COPY_DONE && landed, "key session A to the first destination: done (%d)", r);
    r = copy_to(b, d2, d2_port, 6, &landed);
    check(r == BATON_COPY_LIMIT && !landed,
          "key session B to the second: not done, the key's one link is A's (result %d)", r);
    baton_conn_close(a);
    lc.a = NULL;
    int ok = 0;
    for (int i = 0; i < 100 && !ok; i++) { /* A's session ends asynchronously */
        r = copy_to(b, d2, d2_port, (uint8_t)(7 + i), &landed);
        ok = r == BATON_COPY_DONE && landed;
        if (!ok)
            sleep_ms(50);
    }
    check(ok, "once A has closed, B's copy is done (%d)", r);
    return link_case_close(&lc);
}

int main(int argc, char **argv)
{
    if (argc == 6 && !strcmp(argv[1], "keylinks"))
        return cmd_keylinks((uint16_t)atoi(argv[2]), (uint16_t)atoi(argv[3]),
                            (uint16_t)atoi(argv[4]), argv[5]);
    if (argc == 6 && !strcmp(argv[1], "links"))
        return cmd_links((uint16_t)atoi(argv[2]), (uint16_t)atoi(argv[3]),
                         (uint16_t)atoi(argv[4]), argv[5]);
    if (argc == 5 && !strcmp(argv[1], "grants"))
        return cmd_grants((uint16_t)atoi(argv[2]), argv[3], argv[4]);
    if (argc == 7 && !strcmp(argv[1], "inflight"))
        return cmd_inflight((uint16_t)atoi(argv[2]), (uint16_t)atoi(argv[3]), argv[4], argv[5],
                            argv[6]);
    if (argc == 8 && !strcmp(argv[1], "flood"))
        return cmd_flood((uint16_t)atoi(argv[2]), atol(argv[3]), argv[4], atoi(argv[5]),
                         (uint16_t)atoi(argv[6]), (uint16_t)atoi(argv[7]));
    if (argc == 8 && !strcmp(argv[1], "retry"))
        return cmd_retry((uint16_t)atoi(argv[2]), (uint16_t)atoi(argv[3]),
                         (uint16_t)atoi(argv[4]), argv[5], argv[6], argv[7]);
    fprintf(stderr, "usage: see the comment at the top of tests/integration/peer_cases.c\n");
    return 2;
}
