/* Fuzz target policy: the policy file parser (src/server/policy.c,
 * baton_policy_parse) and the command-line override path
 * (baton_policy_set).
 *
 * Input: the bytes of a policy file, as is. The override path takes the
 * first byte as a key index and the rest of the first line (up to a NUL or
 * LF) as the value.
 *
 * Properties (from policy/README.md):
 *   - the result is 0 or BATON_E_FORMAT; on BATON_E_FORMAT the policy is
 *     unchanged and the message starts with "fuzz:"; a message that names a
 *     line names one that exists (<= the number of LF + 1);
 *   - on success every field lies in its documented range, strings are
 *     NUL-terminated inside their arrays, at most 64 peers, each with a
 *     port >= 1;
 *   - format -> parse gives back the same policy, and parsing is
 *     deterministic;
 *   - an override either fails and changes nothing, or changes the policy
 *     into one that is still in range.
 */
#include "fuzz_common.h"

#include "baton/status.h"
#include "server/policy.h"

static const char *const keys[] = {
    "max_connections", "max_unauthenticated", "max_unauthenticated_per_ip",
    "handshake_timeout", "frame_timeout", "send_timeout", "idle_timeout", "compute_slice",
    "max_message_bytes", "session_memory_bytes", "total_memory_bytes", "max_graph_nodes",
    "max_graph_flops", "max_grants_per_session", "max_peer_links", "max_peer_links_per_session", "peer", "client", "key_file",
    "peer_key_file", "bind", "port", "encrypt", "log_rate", "threads", "max-connections",
    "nope"};

static int terminated(const char *s, size_t cap)
{
    return memchr(s, '\0', cap) != NULL;
}

static void check_ranges(const struct baton_policy *p)
{
    FUZZ_CHECK(p->max_connections >= 1 && p->max_connections <= 1024, "max_connections %u",
               p->max_connections);
    FUZZ_CHECK(p->max_unauthenticated >= 1 && p->max_unauthenticated <= 16384, "unauth");
    FUZZ_CHECK(p->max_unauthenticated_per_ip >= 1 && p->max_unauthenticated_per_ip <= 16384,
               "unauth per ip");
    FUZZ_CHECK(p->handshake_timeout_ms >= 1 && p->handshake_timeout_ms <= 86400000u, "hs");
    FUZZ_CHECK(p->frame_timeout_ms >= 1 && p->frame_timeout_ms <= 86400000u, "frame");
    FUZZ_CHECK(p->send_timeout_ms >= 1 && p->send_timeout_ms <= 86400000u, "send");
    FUZZ_CHECK(p->idle_timeout_ms <= 86400000u, "idle");
    FUZZ_CHECK(p->max_message_bytes >= 4096 && p->max_message_bytes <= (1ull << 32), "msg");
    FUZZ_CHECK(p->session_memory_bytes == 0 ||
                   (p->session_memory_bytes >= 4096 && p->session_memory_bytes <= (1ull << 60)),
               "session");
    FUZZ_CHECK(p->total_memory_bytes == 0 ||
                   (p->total_memory_bytes >= 4096 && p->total_memory_bytes <= (1ull << 60)),
               "total");
    FUZZ_CHECK(p->max_graph_nodes >= 1 && p->max_graph_nodes <= 16384, "nodes");
    FUZZ_CHECK(p->max_graph_flops >= 1, "flops");
    FUZZ_CHECK(p->max_grants_per_session <= 65536, "grants");
    FUZZ_CHECK(p->max_peer_links <= 1024, "links");
    FUZZ_CHECK(p->max_peer_links_per_session <= 1024, "session links");
    FUZZ_CHECK(p->n_peers <= BATON_POLICY_MAX_PEERS, "n_peers %u", p->n_peers);
    for (uint32_t i = 0; i < p->n_peers; i++) {
        FUZZ_CHECK(p->peers[i].port >= 1, "peer port");
        FUZZ_CHECK(terminated(p->peers[i].host, sizeof p->peers[i].host) && p->peers[i].host[0],
                   "peer host");
    }
    FUZZ_CHECK(p->n_clients <= BATON_POLICY_MAX_CLIENTS, "n_clients %u", p->n_clients);
    for (uint32_t i = 0; i < p->n_clients; i++) {
        const struct baton_policy_client *c = &p->clients[i];
        FUZZ_CHECK(terminated(c->name, sizeof c->name) && c->name[0], "client name");
        FUZZ_CHECK(strspn(c->name, "abcdefghijklmnopqrstuvwxyz0123456789_-") == strlen(c->name),
                   "client name bytes");
        for (uint32_t j = 0; j < i; j++)
            FUZZ_CHECK(strcmp(p->clients[j].name, c->name) != 0, "client name twice");
        FUZZ_CHECK(terminated(c->key_file, sizeof c->key_file) && c->key_file[0],
                   "client key_file");
        FUZZ_CHECK(c->max_connections >= 1 && c->max_connections <= 1024, "client conns");
        FUZZ_CHECK(c->session_memory_bytes == 0 ||
                       (c->session_memory_bytes >= 4096 && c->session_memory_bytes <= (1ull << 60)),
                   "client session");
        FUZZ_CHECK(c->max_peer_links <= 1024, "client links");
    }
    FUZZ_CHECK(terminated(p->key_file, sizeof p->key_file), "key_file");
    FUZZ_CHECK(terminated(p->peer_key_file, sizeof p->peer_key_file), "peer_key_file");
    FUZZ_CHECK(terminated(p->bind, sizeof p->bind) && p->bind[0], "bind");
    FUZZ_CHECK(p->encrypt == 0 || p->encrypt == 1, "encrypt");
    FUZZ_CHECK(p->log_rate <= 100000, "log_rate");
    FUZZ_CHECK(p->threads >= 1 && p->threads <= 64, "threads");
}

/* The line number in "fuzz:N: ...", or 0 when the message names none. */
static unsigned long error_line(const char *err)
{
    if (strncmp(err, "fuzz:", 5) != 0 || err[5] < '0' || err[5] > '9')
        return 0;
    return strtoul(err + 5, NULL, 10);
}

static void roundtrip(const struct baton_policy *p)
{
    static char text[1 << 20];
    char err[512];
    size_t need = baton_policy_format(p, text, sizeof text);
    FUZZ_CHECK(need < sizeof text, "formatted policy of %zu bytes", need);
    struct baton_policy *q = malloc(sizeof *q);
    if (!q)
        abort();
    baton_policy_default(q);
    int rc = baton_policy_parse(q, text, need, "format", err, sizeof err);
    FUZZ_CHECK(rc == 0, "format output does not parse: %s", err);
    FUZZ_CHECK(memcmp(p, q, sizeof *q) == 0, "format -> parse changed the policy");
    free(q);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    uint8_t *buf = fuzz_dup(data, size);
    struct baton_policy *p = malloc(sizeof *p), *d = malloc(sizeof *d), *again = malloc(sizeof *p);
    char err[512], err2[512];
    if (!p || !d || !again)
        abort();
    baton_policy_default(d);
    memcpy(p, d, sizeof *p); /* bytewise, padding included */
    err[0] = '\0';
    int rc = baton_policy_parse(p, (const char *)buf, size, "fuzz", err, sizeof err);
    FUZZ_CHECK(rc == 0 || rc == BATON_E_FORMAT, "parse returned %d", rc);

    memcpy(again, d, sizeof *again);
    int rc2 = baton_policy_parse(again, (const char *)buf, size, "fuzz", err2, sizeof err2);
    FUZZ_CHECK(rc2 == rc && memcmp(again, p, sizeof *p) == 0, "parse is not deterministic");

    if (rc != 0) {
        size_t lines = 1;
        for (size_t i = 0; i < size; i++)
            lines += buf[i] == '\n';
        FUZZ_CHECK(memcmp(p, d, sizeof *p) == 0, "a failed parse changed the policy");
        FUZZ_CHECK(strncmp(err, "fuzz:", 5) == 0, "message without the name: %s", err);
        FUZZ_CHECK(error_line(err) <= lines, "message names line %lu of %zu: %s",
                   error_line(err), lines, err);
        FUZZ_CHECK(rc2 == rc && strcmp(err, err2) == 0, "messages differ");
    } else {
        check_ranges(p);
        roundtrip(p);
    }

    /* the override path: key from the first byte, value = rest of line 1 */
    if (size > 0) {
        char value[BATON_POLICY_PATH_BYTES + 8];
        size_t n = 0;
        for (size_t i = 1; i < size && buf[i] != '\n' && buf[i] != '\0' && n < sizeof value - 1;
             i++)
            value[n++] = (char)buf[i];
        value[n] = '\0';
        const char *key = keys[buf[0] % (sizeof keys / sizeof keys[0])];
        memcpy(again, p, sizeof *again);
        rc = baton_policy_set(again, key, value, err, sizeof err);
        FUZZ_CHECK(rc == 0 || rc == BATON_E_FORMAT, "set returned %d", rc);
        if (rc != 0) {
            FUZZ_CHECK(memcmp(again, p, sizeof *p) == 0, "a failed set changed the policy");
            FUZZ_CHECK(strncmp(err, "--", 2) == 0, "set message: %s", err);
        } else {
            check_ranges(again);
            roundtrip(again);
        }
    }
    free(again);
    free(d);
    free(p);
    free(buf);
    return 0;
}
