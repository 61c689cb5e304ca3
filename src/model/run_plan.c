/* The plan of a run (run_internal.h): the stage list (--servers) and the
 * layer split (--split), the connections, and the direct path's set-up at
 * each boundary between stages. */
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "auth/auth.h"
#include "baton/status.h"
#include "model/run_internal.h"
#include "net/net.h"
#include "model/split.h"
#include "server/server.h"

#define STRINGIFY_(x) #x
#define STRINGIFY(x) STRINGIFY_(x) /* a constant's value in a message */
#define ENDPOINT_MAX RUN_ENDPOINT_MAX

/* host:port or [v6addr]:port in text[0..len), port 1..65535. Returns 0, or
 * BATON_E_INVAL with *why saying what is wrong. */
/* 1 if host (NUL-terminated, not empty) is a plausible host name or IPv4
 * address (ipv6 0: letters, digits, '.', '-', '_') or the inside of an IPv6
 * bracket (ipv6 1: hex digits, ':', '.', then an optional %zone of letters,
 * digits, '-', '_', '.'; at least one ':'). Anything else (spaces, ';', '@',
 * brackets, a second address run into the first) is a typo, refused before
 * any name lookup. */
static int host_chars_ok(const char *host, int ipv6)
{
    int colons = 0, zone = 0;
    size_t i;

    if (host[0] == '\0')
        return 0;
    for (i = 0; host[i] != '\0'; i++) {
        const char c = host[i];
        const int alnum =
            (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');

        if (!ipv6) {
            if (!alnum && c != '.' && c != '-' && c != '_')
                return 0;
        } else if (zone) {
            if (!alnum && c != '.' && c != '-' && c != '_')
                return 0;
        } else if (c == '%') {
            zone = 1;
            if (host[i + 1] == '\0')
                return 0;
        } else if (c == ':') {
            colons++;
        } else if (!(c >= '0' && c <= '9') && !(c >= 'a' && c <= 'f') && !(c >= 'A' && c <= 'F') &&
                   c != '.') {
            return 0;
        }
    }
    return !ipv6 || colons > 0;
}

static int parse_endpoint(const char *text, size_t len, char *host, size_t host_cap,
                          uint16_t *port, const char **why)
{
    const char *colon;
    char buf[ENDPOINT_MAX];
    size_t i;
    uint32_t p = 0;

    *why = "want host:port or host:port@peerhost:peerport";
    if (len == 0 || len >= sizeof(buf))
        return BATON_E_INVAL;
    memcpy(buf, text, len);
    buf[len] = '\0';
    colon = strrchr(buf, ':');
    if (colon == NULL || colon == buf || (size_t)(colon - buf) >= host_cap)
        return BATON_E_INVAL;
    /* digits only; p stops growing past 65535, so it cannot wrap */
    for (i = 0; colon[1 + i] != '\0'; i++) {
        if (colon[1 + i] < '0' || colon[1 + i] > '9')
            return BATON_E_INVAL;
        if (p <= 65535)
            p = p * 10 + (uint32_t)(colon[1 + i] - '0');
    }
    if (i == 0)
        return BATON_E_INVAL;
    if (p == 0 || p > 65535 || i > 5) { /* 5 digits at most, as batond and info read it */
        *why = "the port must be 1..65535";
        return BATON_E_INVAL;
    }
    memcpy(host, buf, (size_t)(colon - buf));
    host[colon - buf] = '\0';
    /* [::1]:7340 */
    if (host[0] == '[') {
        size_t hl = strlen(host);

        if (hl < 3 || host[hl - 1] != ']') {
            *why = "an IPv6 address goes in brackets, as in [::1]:7340";
            return BATON_E_INVAL;
        }
        memmove(host, host + 1, hl - 2);
        host[hl - 2] = '\0';
        if (!host_chars_ok(host, 1)) {
            *why = "a bracketed host must be an IPv6 address: hex digits, ':', '.' and a "
                   "%zone of letters and digits";
            return BATON_E_INVAL;
        }
    } else if (!host_chars_ok(host, 0)) {
        *why = "a host may hold only letters, digits, '.', '-' and '_'; an IPv6 address goes "
               "in brackets, as in [::1]:7340";
        return BATON_E_INVAL;
    }
    *port = (uint16_t)p;
    return 0;
}

/* One --servers entry: host:port, or host:port@peerhost:peerport (the address
 * the other servers reach that one at, for COPY_TENSOR_TO). */
struct server_entry {
    char endpoint[ENDPOINT_MAX];      /* host:port as given */
    char peer_endpoint[ENDPOINT_MAX]; /* peerhost:peerport as given, or "" */
    char host[ENDPOINT_MAX];
    uint16_t port;
};

/* Parses the entry text[0..len). Returns 0, or BATON_E_INVAL with *why. */
static int parse_server_entry(const char *text, size_t len, struct server_entry *e,
                              const char **why)
{
    const char *at = memchr(text, '@', len);
    const size_t clen = at ? (size_t)(at - text) : len;
    char peer_host[ENDPOINT_MAX];
    uint16_t peer_port;

    memset(e, 0, sizeof(*e));
    if (clen >= sizeof(e->endpoint) || (at && len - clen - 1 >= sizeof(e->peer_endpoint))) {
        *why = "an address must be shorter than " STRINGIFY(ENDPOINT_MAX) " bytes";
        return BATON_E_INVAL;
    }
    memcpy(e->endpoint, text, clen);
    if (at)
        memcpy(e->peer_endpoint, at + 1, len - clen - 1);
    if (parse_endpoint(text, clen, e->host, sizeof(e->host), &e->port, why) != 0)
        return BATON_E_INVAL;
    if (at && parse_endpoint(at + 1, len - clen - 1, peer_host, sizeof(peer_host), &peer_port,
                             why) != 0)
        return BATON_E_INVAL;
    return 0;
}

/* Length of the entry that starts at p (up to the next ',' or the end). */
static size_t entry_len(const char *p)
{
    const char *comma = strchr(p, ',');

    return comma ? (size_t)(comma - p) : strlen(p);
}

/* The number of stages --servers and --split give, with the split
 * proportions in props[0..n) (the layer counts come later, with the model).
 * Returns that number, or -1 after printing what is wrong. */
int run_plan_parts(const struct baton_run_config *cfg, const char *servers_name,
                      double *props)
{
    const char *p = cfg->servers;
    uint32_t n_servers = 0, i;
    int n_parts;

    if (strcmp(cfg->servers, "local") != 0) {
        for (;;) {
            const size_t len = entry_len(p);
            struct server_entry e;
            const char *why = NULL;

            if (n_servers == BATON_MAX_STAGES) {
                run_msg(cfg, "%s: more than %u servers (the most stages a run can have)\n",
                        servers_name, BATON_MAX_STAGES);
                return -1;
            }
            n_servers++;
            if (len == 0) {
                if (cfg->servers[0] == '\0')
                    run_msg(cfg, "%s is empty (want host:port,host:port,... or local)\n",
                            servers_name);
                else
                    run_msg(cfg, "%s: entry %u of '%s' is empty (want host:port,host:port,... "
                                 "or local)\n",
                            servers_name, n_servers, cfg->servers);
                return -1;
            }
            if (parse_server_entry(p, len, &e, &why) != 0) {
                if (len == 5 && strncmp(p, "local", 5) == 0)
                    why = "'local' stands alone: in-process stages and servers do not mix";
                run_msg(cfg, "%s: bad endpoint '%.*s' (%s)\n", servers_name, (int)len, p, why);
                return -1;
            }
            if (p[len] == '\0')
                break;
            p += len + 1;
        }
    }
    if (cfg->split) {
        n_parts = baton_split_parse(cfg->split, props, BATON_MAX_STAGES);
        if (n_parts < 0) {
            run_msg(cfg,
                    "--split '%s': want up to %u positive plain decimals like 1,1,1 or 0.5,2, "
                    "each at most %.0f\n",
                    cfg->split, BATON_MAX_STAGES, BATON_SPLIT_PART_MAX);
            return -1;
        }
    } else {
        n_parts = n_servers ? (int)n_servers : 1;
        for (i = 0; i < (uint32_t)n_parts; i++)
            props[i] = 1.0;
    }
    if (n_servers && (uint32_t)n_parts != n_servers) {
        run_msg(cfg, "--split has %d part%s but %s names %u server%s\n", n_parts,
                n_parts == 1 ? "" : "s", servers_name, n_servers, n_servers == 1 ? "" : "s");
        return -1;
    }
    return n_parts;
}

int baton_run_check_stages(const struct baton_run_config *cfg, const char *servers_name)
{
    double props[BATON_MAX_STAGES];

    return run_plan_parts(cfg, servers_name ? servers_name : "--servers", props) < 0 ? 2 : 0;
}

/* Opens the client key cfg->key_path into *key (baton_key_open: size,
 * mode, no symlink). Returns 0, or 1 after naming the key as it was given
 * (cfg->key_name). */
static int open_client_key(const struct baton_run_config *cfg, struct baton_key **key)
{
    char err[256];
    int rc = baton_auth_init();

    if (rc == 0)
        rc = baton_key_open(cfg->key_path, key, err, sizeof(err));
    else
        snprintf(err, sizeof(err), "no usable random source (libsodium)");
    if (rc != 0) {
        run_msg(cfg, "%s: %s\n", cfg->key_name ? cfg->key_name : "--key", err);
        return 1;
    }
    return 0;
}

int baton_run_precheck(const struct baton_run_config *cfg, const char *servers_name)
{
    struct baton_key *key = NULL;
    int rc;

    if (baton_run_check_stages(cfg, servers_name) != 0)
        return 2;
    if (!cfg->key_path || !*cfg->key_path)
        return 0;
    rc = open_client_key(cfg, &key);
    baton_key_free(key);
    return rc;
}

/* A warning when connected stage i's server is an earlier stage's too: its
 * endpoint as written, or the address it reached (localhost:P and
 * 127.0.0.1:P). The run works (each stage is its own session on that
 * server), but those stages share the server's cores and memory, which is
 * seldom what a layer split is for. Printed once per repeated stage. */
static void warn_repeated_server(struct run *r, uint32_t i)
{
    const struct stage_rt *s = &r->stages[i];

    for (uint32_t j = 0; j < i; j++) {
        const struct stage_rt *o = &r->stages[j];

        if (strcmp(o->endpoint, s->endpoint) == 0) {
            run_msg(r->cfg,
                    "warning: --servers names %s for stage %u and stage %u: those stages "
                    "share that server's cores and memory\n",
                    s->endpoint, j + 1, i + 1);
            return;
        }
        if (s->addr[0] != '\0' && strcmp(s->addr, "unknown") != 0 &&
            strcmp(o->addr, s->addr) == 0) {
            run_msg(r->cfg,
                    "warning: --servers: stage %u (%s) and stage %u (%s) reach one server (%s): "
                    "those stages share its cores and memory\n",
                    j + 1, o->endpoint, i + 1, s->endpoint, s->addr);
            return;
        }
    }
}

int run_connect_stages(struct run *r)
{
    const uint32_t n_stages = r->n_stages;
    const struct baton_run_config *cfg = r->cfg;
    const char *p = cfg->servers;
    uint32_t i;
    int local = strcmp(cfg->servers, "local") == 0;
    int server_auth = -1;
    struct baton_conn_options co = {.timeout_ms = cfg->timeout_ms, .server_auth = &server_auth};

    if (cfg->key_path && *cfg->key_path) {
        if (open_client_key(cfg, &r->key) != 0)
            return 1;
        co.key = r->key;
    }
    if (local) {
        struct baton_server_config sc;
        int rc;

        baton_server_config_default(&sc);
        sc.n_threads = cfg->n_threads;
        sc.quiet = 1;
        sc.client_key = r->key; /* with --key the in-process stages authenticate too */
        rc = baton_server_create(&sc, &r->local);
        if (rc != 0) {
            run_msg(cfg, "cannot start the in-process server: %s\n", baton_status_str(rc));
            return 1;
        }
    }
    for (i = 0; i < n_stages; i++) {
        struct stage_rt *s = &r->stages[i];
        int rc;

        s->index = i;
        if (local) {
            int fds[2];

            snprintf(s->endpoint, sizeof(s->endpoint), "local");
            if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) != 0) {
                run_msg(cfg, "socketpair: %s\n", strerror(errno));
                return 1;
            }
            rc = baton_server_serve_fd(r->local, fds[0]);
            if (rc != 0) {
                close(fds[1]);
                return stage_fail(r, s, "in-process serve", rc);
            }
            rc = baton_conn_adopt_fd_ex(fds[1], &co, &s->conn);
        } else {
            /* checked by plan_parts before the model was opened */
            const size_t len = entry_len(p);
            struct server_entry e;
            const char *why = NULL;

            if (parse_server_entry(p, len, &e, &why) != 0) {
                run_msg(cfg, "--servers: bad endpoint '%.*s' (%s)\n", (int)len, p, why);
                return 2;
            }
            memcpy(s->endpoint, e.endpoint, sizeof(s->endpoint));
            memcpy(s->peer_endpoint, e.peer_endpoint, sizeof(s->peer_endpoint));
            p += p[len] == ',' ? len + 1 : len;
            /* the TCP connection, then the handshake: each failure gets
             * its own hint */
            int fd = -1;

            rc = baton_net_connect(e.host, e.port, co.timeout_ms, &fd);
            if (rc != 0)
                return connect_fail(r, s, rc, 1, rc == BATON_E_IO ? errno : 0, -1);
            baton_net_peer_string(fd, s->addr, sizeof(s->addr));
            warn_repeated_server(r, i);
            rc = baton_conn_adopt_fd_ex(fd, &co, &s->conn);
        }
        if (rc != 0)
            return connect_fail(r, s, rc, 0, 0, server_auth);
        baton_conn_set_timeout(s->conn, cfg->timeout_ms);
    }
    return 0;
}

/* The binary address of endpoint "host:port" for COPY_TENSOR_TO (the first
 * IPv4 or IPv6 address the host resolves to; an IPv4-mapped IPv6 address
 * counts as IPv4, as on the servers' allow-lists). */
static int resolve_peer(const char *endpoint, struct baton_peer_dest *d)
{
    char host[ENDPOINT_MAX];
    uint16_t port;
    struct addrinfo hints, *res = NULL, *ai;
    const char *why = NULL;
    int rc = BATON_E_NOT_FOUND;

    if (parse_endpoint(endpoint, strlen(endpoint), host, sizeof(host), &port, &why) != 0)
        return BATON_E_INVAL;
    memset(&hints, 0, sizeof(hints));
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    if (getaddrinfo(host, NULL, &hints, &res) != 0)
        return BATON_E_NOT_FOUND;
    for (ai = res; ai && rc != 0; ai = ai->ai_next) {
        memset(d->addr, 0, sizeof(d->addr));
        if (ai->ai_family == AF_INET) {
            d->family = BATON_PEER_FAMILY_IPV4;
            memcpy(d->addr, &((const struct sockaddr_in *)ai->ai_addr)->sin_addr, 4);
            rc = 0;
        } else if (ai->ai_family == AF_INET6) {
            const struct in6_addr *a = &((const struct sockaddr_in6 *)ai->ai_addr)->sin6_addr;

            if (IN6_IS_ADDR_V4MAPPED(a)) {
                d->family = BATON_PEER_FAMILY_IPV4;
                memcpy(d->addr, a->s6_addr + 12, 4);
            } else {
                d->family = BATON_PEER_FAMILY_IPV6;
                memcpy(d->addr, a->s6_addr, 16);
            }
            rc = 0;
        }
    }
    freeaddrinfo(res);
    d->port = port;
    return rc;
}

/* The decode ring (docs/PROTOCOL.md "Asynchronous hand-off"): the last
 * stage hands each decode step's token ids (its argmax or sampled ids, 4
 * bytes per sequence of the step) straight to stage 1's token input, so
 * the coordinator need not turn them around. Set up (r->bounds[n_stages -
 * 1]: a grant on each of stage 1's token slots in use, r->tok_slots of
 * them, and a route to each on the last stage from its io.argmax) for
 * decode over 2 or more stages with the pipeline and --ring on, when the
 * last stage offers PEER_COPY and stage 1 PEER_COPY and OWNER_FENCE. With
 * several sequences: not with continuous batching (a step's prompt chunk
 * comes from the coordinator); with G pipeline groups a step takes the
 * tokens of its group's step before (r->ring_gap = G), each step's into
 * its own token slot of stage 1, so G <= --slots. 0 or 1 (said). */
/* Why the decode ring will not be set up (setup_ring), or NULL when it
 * will: dest gets stage 1's peer address. whybuf (RUN_ENDPOINT_MAX + 64
 * bytes) may hold the reason. Needs 2 or more stages and a decode step. */
static const char *ring_off_reason(struct run *r, struct baton_peer_dest *dest, char *whybuf)
{
    const struct baton_run_config *cfg = r->cfg;
    const uint32_t p = r->n_stages;
    struct stage_rt *s = &r->stages[p - 1], *nx = &r->stages[0];
    const char *ep = nx->peer_endpoint[0] ? nx->peer_endpoint : nx->endpoint;
    const size_t cap = RUN_ENDPOINT_MAX + 64;
    const char *why = NULL;

    if (!cfg->ring)
        why = "--ring off";
    else if (r->seqs && r->n_chunk)
        why = "continuous batching: a step's prompt chunk comes from the coordinator";
    else if (r->seqs && r->n_groups > BATON_LLAMA_MAX_SLOTS) {
        snprintf(whybuf, cap,
                 "--groups %u: a group needs an input slot of its own, and there are at most %u "
                 "(--slots)",
                 r->n_groups, BATON_LLAMA_MAX_SLOTS);
        why = whybuf;
    } else if (r->seqs && r->n_groups > r->n_slots) {
        snprintf(whybuf, cap, "--groups %u needs as many input slots: --slots %u",
                 r->n_groups, r->n_groups);
        why = whybuf;
    }
    else if (!cfg->pipeline)
        why = "--pipeline off";
    else if (r->want_logits)
        why = cfg->logits_path ? "the coordinator reads the logits (--logits-out)"
                               : "the coordinator reads the logits (--report-gap)";
    else if (!cfg->p2p || r->local)
        why = cfg->p2p ? "in-process stages" : cfg->p2p_off_name ? cfg->p2p_off_name : "--p2p off";
    else if (!(baton_conn_server_hello(s->conn)->features & BATON_FEATURE_PEER_COPY) ||
             !(baton_conn_server_hello(nx->conn)->features & BATON_FEATURE_PEER_COPY)) {
        const int last_has = (baton_conn_server_hello(s->conn)->features &
                              BATON_FEATURE_PEER_COPY) != 0;
        const int first_has = (baton_conn_server_hello(nx->conn)->features &
                               BATON_FEATURE_PEER_COPY) != 0;

        snprintf(whybuf, cap, "stage 1 and the last stage both need the peer key (batond "
                              "--peer-key); %s",
                 first_has ? "the last stage has none" : last_has ? "stage 1 has none"
                                                                  : "neither has one");
        why = whybuf;
    }
    else if (!(baton_conn_server_hello(nx->conn)->features & BATON_FEATURE_OWNER_FENCE))
        why = "stage 1 is an older batond";
    memset(dest, 0, sizeof(*dest));
    if (why == NULL && resolve_peer(ep, dest) != 0) {
        snprintf(whybuf, cap, "cannot resolve stage 1's peer address %s", ep);
        why = whybuf;
    }
    return why;
}

uint32_t run_planned_tok_slots(struct run *r)
{
    struct baton_peer_dest dest;
    char whybuf[RUN_ENDPOINT_MAX + 64];

    if (r->n_stages < 2 || r->cfg->n_predict < 2 || !r->seqs || r->n_groups <= 1 ||
        ring_off_reason(r, &dest, whybuf) != NULL)
        return 1;
    return r->n_slots;
}

static int setup_ring(struct run *r)
{
    const struct baton_run_config *cfg = r->cfg;
    const uint32_t p = r->n_stages;
    struct stage_rt *s = &r->stages[p - 1], *nx = &r->stages[0];
    struct boundary *b = &r->bounds[p - 1];
    const char *ep = nx->peer_endpoint[0] ? nx->peer_endpoint : nx->endpoint;
    struct baton_peer_dest dest;
    const char *why;
    char whybuf[RUN_ENDPOINT_MAX + 64];
    int rc;

    if (p < 2 || cfg->n_predict < 2)
        return 0; /* nothing to say: one stage, or no decode step */
    why = ring_off_reason(r, &dest, whybuf);
    if (why != NULL) {
        fprintf(cfg->log, "plan: decode ring off: tokens through the coordinator (%s)\n", why);
        return 0;
    }
    r->tok_slots = r->seqs && r->n_groups > 1 ? r->n_slots : 1;
    r->ring_gap = r->seqs ? r->n_groups : 1;
    for (uint32_t j = 0; j < r->tok_slots; j++) {
        const struct baton_tensor_desc *t = &nx->st.io.tokens[j];

        rc = baton_grant_write(nx->conn, t->buffer, t->offset, t->nbytes, b->grant[j]);
        if (rc != 0)
            return stage_fail(r, nx, "GRANT_WRITE", rc);
        memcpy(dest.grant, b->grant[j], BATON_GRANT_ID_BYTES);
        rc = baton_copy_route(s->conn, &s->st.io.argmax, &dest, &b->route[j]);
        if (rc != 0)
            return stage_fail(r, s, "COPY_ROUTE", rc);
        b->n_grants = j + 1;
    }
    snprintf(b->dest_name, sizeof b->dest_name, "%s", ep);
    b->dest0 = dest;
    memcpy(b->dest0.grant, b->grant[0], BATON_GRANT_ID_BYTES);
    b->direct = 1;
    fprintf(cfg->log, "plan: decode ring: stage %u -> 1 hands each token to %s (if its "
                      "allow-list names it; else through the coordinator)\n",
            p, ep);
    return 0;
}

/* Sets up the direct path at every boundary whose two servers advertise
 * PEER_COPY: a grant per input slot of the next stage's hidden_in (each
 * the whole slot, for up to n_ubatch tokens), a route per slot on the
 * source (its hidden_out to that grant at the next stage's peer-facing
 * address). A boundary that cannot be set up stays on the hub path; its
 * plan line says why. Then run_open_links opens the peer links (whether
 * each source's allow-list names its destination shows there). */
int run_setup_direct(struct run *r)
{
    uint32_t i, k;

    for (i = 0; i + 1 < r->n_stages; i++) {
        struct stage_rt *s = &r->stages[i], *nx = &r->stages[i + 1];
        struct boundary *b = &r->bounds[i];
        const char *ep = nx->peer_endpoint[0] ? nx->peer_endpoint : nx->endpoint;
        const int s_peer = (baton_conn_server_hello(s->conn)->features &
                            BATON_FEATURE_PEER_COPY) != 0;
        const int nx_peer = (baton_conn_server_hello(nx->conn)->features &
                             BATON_FEATURE_PEER_COPY) != 0;
        struct baton_peer_dest dest;
        int rc;

        if (!r->cfg->p2p) {
            fprintf(r->cfg->log, "plan: stage %u -> %u hub (%s)\n", i + 1, i + 2,
                    r->cfg->p2p_off_name ? r->cfg->p2p_off_name : "--p2p off");
            continue;
        }
        if (r->local) { /* in-process stages hold no peer key */
            fprintf(r->cfg->log, "plan: stage %u -> %u hub (in-process stages)\n", i + 1, i + 2);
            continue;
        }
        if (!s_peer || !nx_peer) {
            /* an end without peer support: batond without --peer-key (or older) */
            const struct stage_rt *no = s_peer ? nx : s;

            if (!s_peer && !nx_peer && strcmp(s->endpoint, nx->endpoint) == 0)
                fprintf(r->cfg->log, "plan: stage %u -> %u hub (%s does not offer the direct "
                                     "path: batond without --peer-key)\n",
                        i + 1, i + 2, s->endpoint);
            else if (!s_peer && !nx_peer)
                fprintf(r->cfg->log, "plan: stage %u -> %u hub (neither %s nor %s offers the "
                                     "direct path: batond without --peer-key)\n",
                        i + 1, i + 2, s->endpoint, nx->endpoint);
            else
                fprintf(r->cfg->log, "plan: stage %u -> %u hub (stage %u at %s does not offer "
                                     "the direct path: batond without --peer-key)\n",
                        i + 1, i + 2, no->index + 1, no->endpoint);
            continue;
        }
        if (!(baton_conn_server_hello(nx->conn)->features & BATON_FEATURE_OWNER_FENCE)) {
            /* the engine voids a destination's grants before a redo
             * through the hub (seal_boundary): an older batond cannot */
            fprintf(r->cfg->log, "plan: stage %u -> %u hub (stage %u at %s is an older batond: "
                                 "it cannot void late hand-offs; a batond of this version is "
                                 "needed for the direct path)\n",
                    i + 1, i + 2, nx->index + 1, nx->endpoint);
            continue;
        }
        memset(&dest, 0, sizeof(dest));
        rc = resolve_peer(ep, &dest);
        if (rc != 0) {
            fprintf(r->cfg->log, "plan: stage %u -> %u hub (cannot resolve %s)\n", i + 1, i + 2,
                    ep);
            continue;
        }
        for (k = 0; k < r->n_slots; k++) {
            const struct baton_tensor_desc *in = &nx->st.io.hidden_in[k];

            rc = baton_grant_write(nx->conn, in->buffer, in->offset, in->nbytes, b->grant[k]);
            if (rc != 0)
                return stage_fail(r, nx, "GRANT_WRITE", rc);
            memcpy(dest.grant, b->grant[k], BATON_GRANT_ID_BYTES);
            dest.grant_offset = 0;
            rc = baton_copy_route(s->conn, &s->st.io.hidden_out, &dest, &b->route[k]);
            if (rc != 0)
                return stage_fail(r, s, "COPY_ROUTE", rc);
        }
        snprintf(b->dest_name, sizeof b->dest_name, "%s", ep);
        b->dest0 = dest;
        memcpy(b->dest0.grant, b->grant[0], BATON_GRANT_ID_BYTES);
        b->n_grants = r->n_slots;
        b->direct = 1;
        r->n_direct++;
        fprintf(r->cfg->log, "plan: stage %u -> %u direct (hand-off to %s)\n", i + 1, i + 2,
                ep);
    }
    if (setup_ring(r) != 0)
        return 1;
    return run_open_links(r);
}

/* This session's peer counters on the server of s (a COPY_TENSOR_TO with
 * no destination, which moves nothing). 0, or the call's error. */
int run_query_peer(struct stage_rt *s, uint64_t *sent, uint64_t *received)
{
    struct baton_peer_dest none;
    struct baton_copy_result res;
    int rc;

    memset(&none, 0, sizeof(none));
    rc = baton_copy_tensor_to(s->conn, &s->st.io.pos, 0, 0, &none, NULL, &res);
    if (rc == 0) {
        *sent = res.peer_bytes_sent;
        *received = res.peer_bytes_received;
    }
    return rc;
}
