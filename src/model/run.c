/* The coordinator's run loop (see run.h). */
#include "model/run.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "auth/auth.h"
#include "baton/client.h"
#include "baton/status.h"
#include "model/gguf.h"
#include "model/graph_builder.h"
#include "model/llama.h"
#include "model/sampler.h"
#include "model/split.h"
#include "model/tokenizer.h"
#include "server/server.h"

#define ALIGN 64u
#define UPLOAD_CHUNK (16u << 20)
#define ENDPOINT_MAX 128
#define STRINGIFY_(x) #x
#define STRINGIFY(x) STRINGIFY_(x) /* a constant's value in a message */

struct stage_rt {
    uint32_t index; /* 0-based */
    char endpoint[ENDPOINT_MAX];
    char peer_endpoint[ENDPOINT_MAX]; /* address other servers reach it at ("" = endpoint) */
    struct baton_conn *conn;
    /* Direct path to the next stage: its peer-facing address and the grant on
     * its hidden_in, set up once (setup_direct). */
    int direct;
    struct baton_peer_dest next_dest;
    uint32_t last_outcome; /* of the previous COPY_TENSOR_TO, for log lines */
    /* statistics, decode window */
    uint64_t copies_done, copies_not_done, hidden_gets, hidden_sets;
    uint64_t peer_sent0, peer_recv0; /* the server's counters at the window's start */
    int peer_ok;
    uint64_t peer_sent, peer_recv; /* ... over the window */
    struct baton_cmd_stats cmd[BATON_CMD_LIMIT]; /* snapshot at the window's end */
    struct baton_llama_stage st;
    uint64_t weights_buf, kv_buf, io_buf;
    uint64_t weights_bytes, kv_bytes, io_bytes;
    struct baton_tensor_desc *leaves;
    struct baton_graph_node *nodes;
    uint32_t cap_leaves, cap_nodes;
};

struct run {
    const struct baton_run_config *cfg;
    struct baton_gguf *gguf;
    struct baton_tokenizer *tok;
    struct baton_llama_hparams hp;
    struct baton_server *local; /* in-process server for --servers local */
    struct baton_key *key;      /* cfg->key_path, loaded (NULL: no authentication) */
    struct stage_rt *stages;
    uint32_t n_stages;
    float *hidden;      /* n_embd * n_ubatch, the hub's copy of a boundary */
    float *logits;      /* n_vocab */
    int32_t *pos_host;  /* n_ubatch */
    struct baton_sample_entry *sample_scratch;
    uint64_t hidden_bytes_hub; /* hidden-state bytes through the coordinator */
    uint64_t token_bytes;      /* token ids, positions, last index and argmax bytes */
    uint64_t logits_bytes;     /* logits bytes */
    uint32_t n_direct;         /* boundaries on the direct path */
    double min_gap;            /* smallest top-2 logit gap seen (report_gap) */
    int text_open;             /* text streamed to cfg->out without its final newline */
};

/* Difference between the largest and second-largest logit. */
static double top2_gap(const float *v, size_t n)
{
    double a = -INFINITY, b = -INFINITY;
    size_t i;

    for (i = 0; i < n; i++) {
        if (v[i] > a) {
            b = a;
            a = v[i];
        } else if (v[i] > b) {
            b = v[i];
        }
    }
    return a - b;
}

static double now_s(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static uint64_t align_up(uint64_t v)
{
    return (v + (ALIGN - 1)) & ~(uint64_t)(ALIGN - 1);
}

static void run_vmsg(const struct baton_run_config *cfg, const char *fmt, va_list ap)
{
    flockfile(cfg->log);
    fprintf(cfg->log, "%s: ", cfg->prog ? cfg->prog : "baton");
    vfprintf(cfg->log, fmt, ap);
    funlockfile(cfg->log);
}

/* Prints "PROG: " and the formatted rest (which ends in "\n") to cfg->log:
 * every error and notice names the command the user typed (cfg->prog). */
__attribute__((format(printf, 2, 3))) static void run_msg(const struct baton_run_config *cfg,
                                                          const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    run_vmsg(cfg, fmt, ap);
    va_end(ap);
}

/* run_msg once text may have been streamed: a line of text on cfg->out
 * without its newline is ended first (and flushed), so that on a terminal,
 * where stdout and stderr share the screen, the message does not continue
 * the text ("Once upon a timebaton run: ..."). */
__attribute__((format(printf, 2, 3))) static void stage_msg(struct run *r, const char *fmt, ...)
{
    va_list ap;

    if (r->text_open) {
        fputc('\n', r->cfg->out);
        fflush(r->cfg->out);
        r->text_open = 0;
    }
    va_start(ap, fmt);
    run_vmsg(r->cfg, fmt, ap);
    va_end(ap);
}

int baton_run_kv_cache_bytes(uint32_t head_dim, uint32_t n_head_kv, uint32_t n_ctx,
                             uint32_t n_layers, uint64_t *bytes)
{
    /* head_dim * n_head_kv * 4 < 2^66 and n_ctx < 2^32: check each product */
    const uint64_t row = (uint64_t)head_dim * n_head_kv;
    uint64_t one;

    if (n_layers == 0) {
        *bytes = ALIGN;
        return 0;
    }
    if (row > UINT64_MAX / 4 || (n_ctx != 0 && row * 4 > UINT64_MAX / n_ctx))
        return BATON_E_OVERFLOW;
    one = row * 4 * n_ctx;
    if (one > UINT64_MAX - (ALIGN - 1))
        return BATON_E_OVERFLOW;
    one = align_up(one);
    if (one > UINT64_MAX / 2 / n_layers)
        return BATON_E_OVERFLOW;
    *bytes = one * 2 * n_layers;
    return 0;
}

/* "N bytes", or one decimal in the largest binary unit below it ("5.9 GiB"). */
static void format_bytes(char *buf, size_t cap, uint64_t n)
{
    static const char *const units[] = {"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
    double v = (double)n;
    int u = -1;

    while (v >= 1024.0 && u < 5) {
        v /= 1024.0;
        u++;
    }
    if (u < 0)
        snprintf(buf, cap, "%" PRIu64 " bytes", n);
    else
        snprintf(buf, cap, "%.1f %s", v, units[u]);
}

/* The context (n_ctx) as the user set it, or did not (cfg->ctx_origin):
 * "--ctx 8000", "the default --ctx 512", "-p 50 + -n 4 (a KV cache of 62
 * positions)". */
static void ctx_name(const struct baton_run_config *cfg, char *buf, size_t cap)
{
    switch (cfg->ctx_origin) {
    case BATON_CTX_DEFAULT:
        snprintf(buf, cap, "the default --ctx %u", cfg->n_ctx);
        break;
    case BATON_CTX_BENCH:
        snprintf(buf, cap, "-p %zu + -n %u (a KV cache of %u positions)", cfg->n_prompt_ids,
                 cfg->n_predict, cfg->n_ctx);
        break;
    default:
        snprintf(buf, cap, "--ctx %u", cfg->n_ctx);
        break;
    }
}

/* The KV cache is the one buffer whose size the user sets (--ctx, or bench's
 * -p + -n): a server that cannot hold it for its size is reported in those
 * terms, with the bytes the stage needs, and why ("; the server ...").
 * Returns 1. */
static int kv_fail(struct run *r, const struct stage_rt *s, uint64_t kv_bytes, const char *why)
{
    char size[32], ctx[96];

    format_bytes(size, sizeof size, kv_bytes);
    ctx_name(r->cfg, ctx, sizeof ctx);
    stage_msg(r, "%s needs %s of KV cache on stage %u (%s, %u layer%s); %s\n", ctx, size,
              s->index + 1, s->endpoint, s->st.layer_end - s->st.layer_begin,
              s->st.layer_end - s->st.layer_begin == 1 ? "" : "s", why);
    return 1;
}

/* "PROG: stage i (ENDPOINT): WHAT failed: E_X (text)", with what the user
 * can do where the status says it: a deadline that passed is --timeout's
 * (baton run and baton bench both take it), or the server's own frame
 * deadline when it stopped waiting for the rest of a request (its error
 * frame says E_TIMEOUT too, and the client cannot tell the two apart), on a
 * line of its own. Returns 1. */
static int stage_fail(struct run *r, const struct stage_rt *s, const char *what, int rc)
{
    const int connect = strcmp(what, "connect") == 0;

    stage_msg(r, "stage %u (%s): %s failed: %s (%s)%s\n", s->index + 1, s->endpoint, what,
              baton_status_name(rc), baton_status_str(rc),
              connect && rc == BATON_E_IO      ? "; is batond running and listening there?"
              : connect && rc == BATON_E_INVAL ? "; the host name does not resolve"
              /* the refusal frame of the server's accept (server.c admit_locked) */
              : connect && rc == BATON_E_LIMIT
                  ? "; the server is at its connection limit (batond --max-connections), or "
                    "at its limit of connections still in their handshake "
                    "(--max-unauthenticated, --max-unauthenticated-per-ip); batond "
                    "--print-policy shows them"
              : rc != BATON_E_AUTH             ? ""
              : r->key                         ? "; the server has another key, or requires none"
                                               : "; the server requires a key: give --key FILE or "
                                                 "BATON_KEY_FILE");
    if (rc == BATON_E_TIMEOUT)
        stage_msg(r,
                  "stage %u (%s) timed out: either it did not answer within --timeout %d ms "
                  "(the deadline of every server call; a larger --timeout gives a slow server "
                  "more time), or it stopped waiting for the rest of a request this side was "
                  "still sending (its frame deadline, policy frame_timeout, default 10s: a "
                  "slow link needs a larger one)\n",
                  s->index + 1, s->endpoint, r->cfg->timeout_ms);
    return 1;
}

/* After a refused ALLOC_BUFFER of a stage's weights (the session's first
 * buffer): the bytes asked for and the server limits that apply, where the
 * status says it is memory (server: cmd_alloc_buffer, handles.c). E_LIMIT:
 * more than the server's memory for all sessions (total_memory_bytes), or
 * its table of buffers is full, which is not the size's fault and gets no
 * hint; E_QUOTA: more than one session may hold (session_memory_bytes) or
 * than is free of the total now. info: the stage's DEVICE_INFO, from just
 * before. In-process stages have no batond flags to name. */
static void weights_alloc_hint(struct run *r, const struct stage_rt *s,
                               const struct baton_device_info *info, int rc)
{
    const uint32_t n_layers = s->st.layer_end - s->st.layer_begin;
    const char *const total_flag = r->local ? "" : " (batond --total-memory-bytes)";
    const char *const session_flag = r->local ? "" : " (batond --session-memory-bytes)";
    const char *const see = r->local ? "" : "; batond --print-policy shows the server's limits";
    char want[32], total[32], session[32], free_now[32];

    format_bytes(want, sizeof want, s->weights_bytes);
    format_bytes(total, sizeof total, info->total_memory);
    format_bytes(session, sizeof session, info->max_buffer_bytes);
    format_bytes(free_now, sizeof free_now, info->free_memory);
    if (rc == BATON_E_LIMIT && s->weights_bytes > info->total_memory)
        stage_msg(r,
                  "stage %u asked for %s (%" PRIu64
                  " bytes, which the server rounds up to whole pages) for the weights of its "
                  "%u layer%s, more than the server's memory for all sessions, %s%s; fewer "
                  "layers on the stage (--split) need less%s\n",
                  s->index + 1, want, s->weights_bytes, n_layers, n_layers == 1 ? "" : "s", total,
                  total_flag, see);
    else if (rc == BATON_E_QUOTA)
        stage_msg(r,
                  "stage %u asked for %s (%" PRIu64
                  " bytes, which the server rounds up to whole pages) for the weights of its "
                  "%u layer%s; the server allows one session at most %s%s and had %s free of %s "
                  "for all sessions%s; fewer layers on the stage (--split) need less%s\n",
                  s->index + 1, want, s->weights_bytes, n_layers, n_layers == 1 ? "" : "s",
                  session, session_flag, free_now, total, total_flag, see);
}

/* ---- setup ---- */

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
    if (p == 0 || p > 65535) {
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
static int plan_parts(const struct baton_run_config *cfg, const char *servers_name,
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

    return plan_parts(cfg, servers_name ? servers_name : "--servers", props) < 0 ? 2 : 0;
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

static int connect_stages(struct run *r, uint32_t n_stages)
{
    const struct baton_run_config *cfg = r->cfg;
    const char *p = cfg->servers;
    uint32_t i;
    int local = strcmp(cfg->servers, "local") == 0;
    struct baton_conn_options co = {.timeout_ms = cfg->timeout_ms};

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
            rc = baton_conn_connect_ex(e.host, e.port, &co, &s->conn);
        }
        if (rc != 0)
            return stage_fail(r, s, "connect", rc);
        baton_conn_set_timeout(s->conn, cfg->timeout_ms);
    }
    return 0;
}

/* Looks up a weight tensor and checks its shape ({ne0, ne1}, ne1 = 1 for vectors). */
static int find_weight(struct run *r, const char *name, uint64_t ne0, uint64_t ne1,
                       struct baton_gguf_tensor *t)
{
    int rc = baton_gguf_find_tensor(r->gguf, name, t, NULL);

    if (rc != 0) {
        stage_msg(r, "%s: tensor '%s': missing\n", r->cfg->model_path, name);
        return 1;
    }
    if (t->ne[0] != ne0 || t->ne[1] != ne1 || t->ne[2] != 1 || t->ne[3] != 1) {
        stage_msg(r,
                  "%s: tensor '%s': shape (%" PRIu64 ", %" PRIu64 ") but the model needs "
                  "(%" PRIu64 ", %" PRIu64 ")\n",
                  r->cfg->model_path, name, t->ne[0], t->ne[1], ne0, ne1);
        return 1;
    }
    return 0;
}

/* One weight to upload: where it comes from and where it goes. */
struct upload_item {
    struct baton_gguf_tensor src;
    struct baton_tensor_desc *dst;
};

static int place(struct run *r, struct upload_item *items, uint32_t *n_items, uint64_t *offset,
                 const char *name, uint64_t ne0, uint64_t ne1, struct baton_tensor_desc *dst)
{
    struct upload_item *it = &items[*n_items];
    int rc;

    if (find_weight(r, name, ne0, ne1, &it->src) != 0)
        return 1;
    *offset = align_up(*offset);
    rc = baton_tensor_init(dst, 0, *offset, it->src.type, ne0, ne1, 1, 1);
    if (rc != 0) {
        stage_msg(r, "%s: tensor '%s': %s\n", r->cfg->model_path, name,
                  baton_status_str(rc));
        return 1;
    }
    it->dst = dst;
    *offset += dst->nbytes;
    (*n_items)++;
    return 0;
}

/* Bytes of the hidden state of one ubatch (n_embd x n_ubatch floats): what
 * a split run sends a stage in one SET_TENSOR on the hub path. */
static uint64_t hidden_state_bytes(const struct run *r)
{
    return (uint64_t)r->hp.n_embd * r->cfg->n_ubatch * sizeof(float);
}

static int upload_stage(struct run *r, struct stage_rt *s, double *bytes_total)
{
    const struct baton_llama_hparams *hp = &r->hp;
    struct baton_llama_stage *st = &s->st;
    const uint32_t n_local = st->layer_end - st->layer_begin;
    const uint64_t kv_dim = (uint64_t)hp->head_dim * hp->n_head_kv;
    struct upload_item *items;
    uint32_t n_items = 0, i, l;
    uint64_t off = 0, done = 0, kv_bytes = 0;
    int ret = 1, rc;
    char name[96];
    struct baton_device_info info;
    const int tty = isatty(fileno(r->cfg->log));

    items = calloc((size_t)n_local * 9 + 3, sizeof(*items));
    st->layers = calloc(n_local ? n_local : 1, sizeof(*st->layers));
    if (items == NULL || st->layers == NULL) {
        stage_msg(r, "out of memory\n");
        goto out;
    }
    rc = baton_device_info(s->conn, &info);
    if (rc != 0) {
        ret = stage_fail(r, s, "DEVICE_INFO", rc);
        goto out;
    }
    /* fits in 64 bits: baton_run checked every stage before connecting */
    (void)baton_run_kv_cache_bytes(hp->head_dim, hp->n_head_kv, r->cfg->n_ctx, n_local,
                                   &kv_bytes);
    /* a KV cache larger than any buffer the server grants is said now, in
     * terms of --ctx, before the weights are uploaded */
    if (info.max_buffer_bytes != 0 && kv_bytes > info.max_buffer_bytes) {
        char limit[32], why[96];

        format_bytes(limit, sizeof limit, info.max_buffer_bytes);
        snprintf(why, sizeof why, "the server allows at most %s in one buffer", limit);
        ret = kv_fail(r, s, kv_bytes, why);
        goto out;
    }
    if (st->first && place(r, items, &n_items, &off, "token_embd.weight", hp->n_embd,
                           hp->n_vocab, &st->tok_embd) != 0)
        goto out;
    for (l = st->layer_begin; l < st->layer_end; l++) {
        struct baton_llama_layer *L = &st->layers[l - st->layer_begin];
        static const char *const fmt[9] = {
            "blk.%u.attn_norm.weight", "blk.%u.attn_q.weight",  "blk.%u.attn_k.weight",
            "blk.%u.attn_v.weight",    "blk.%u.attn_output.weight", "blk.%u.ffn_norm.weight",
            "blk.%u.ffn_gate.weight",  "blk.%u.ffn_up.weight",  "blk.%u.ffn_down.weight"};
        const uint64_t shape[9][2] = {
            {hp->n_embd, 1},       {hp->n_embd, hp->n_embd}, {hp->n_embd, kv_dim},
            {hp->n_embd, kv_dim},  {hp->n_embd, hp->n_embd}, {hp->n_embd, 1},
            {hp->n_embd, hp->n_ff}, {hp->n_embd, hp->n_ff},  {hp->n_ff, hp->n_embd}};
        struct baton_tensor_desc *dst[9] = {&L->attn_norm, &L->wq,     &L->wk,
                                            &L->wv,        &L->wo,     &L->ffn_norm,
                                            &L->w_gate,    &L->w_up,   &L->w_down};
        uint32_t k;

        for (k = 0; k < 9; k++) {
            snprintf(name, sizeof(name), fmt[k], l);
            if (place(r, items, &n_items, &off, name, shape[k][0], shape[k][1], dst[k]) != 0)
                goto out;
        }
    }
    if (st->last) {
        struct baton_gguf_tensor t;
        const char *out_name = "output.weight";

        if (place(r, items, &n_items, &off, "output_norm.weight", hp->n_embd, 1,
                  &st->output_norm) != 0)
            goto out;
        /* tied output head: llama.cpp falls back to the embedding too */
        if (baton_gguf_find_tensor(r->gguf, out_name, &t, NULL) != 0)
            out_name = "token_embd.weight";
        if (place(r, items, &n_items, &off, out_name, hp->n_embd, hp->n_vocab, &st->output) != 0)
            goto out;
    }
    for (i = 0; i < n_items; i++) {
        const uint32_t ty = items[i].src.type;
        const int is_vector = items[i].src.n_dims <= 1;

        /* norms are F32 vectors; matrices F32, F16, Q8_0 or Q4_0 */
        if (is_vector ? ty != BATON_TYPE_F32
                      : !(ty == BATON_TYPE_F32 || ty == BATON_TYPE_F16 ||
                          ty == BATON_TYPE_Q8_0 || ty == BATON_TYPE_Q4_0)) {
            stage_msg(r, "%s: tensor '%s' has type %s, which the llama graph does not use "
                         "for a %s\n",
                      r->cfg->model_path, items[i].src.name, baton_type_name(ty),
                      is_vector ? "norm weight (f32 only)" : "matrix (f32, f16, q8_0, q4_0)");
            goto out;
        }
        if (items[i].src.type >= 64 || !(info.type_mask & (1ull << items[i].src.type))) {
            stage_msg(r, "%s: tensor '%s' has type %s, which stage %u (%s) cannot compute\n",
                      r->cfg->model_path, items[i].src.name, baton_type_name(items[i].src.type),
                      s->index + 1, s->endpoint);
            goto out;
        }
    }
    s->weights_bytes = align_up(off);
    rc = baton_alloc_buffer(s->conn, s->weights_bytes, &s->weights_buf);
    if (rc != 0) {
        ret = stage_fail(r, s, "ALLOC_BUFFER (weights)", rc);
        weights_alloc_hint(r, s, &info, rc);
        goto out;
    }
    for (i = 0; i < n_items; i++) {
        const struct upload_item *it = &items[i];
        uint64_t pos = 0;

        it->dst->buffer = s->weights_buf;
        while (pos < it->src.nbytes) {
            uint64_t n = it->src.nbytes - pos;

            if (n > UPLOAD_CHUNK)
                n = UPLOAD_CHUNK;
            rc = baton_set_tensor(s->conn, it->dst, pos, (const uint8_t *)it->src.data + pos, n);
            if (rc != 0) {
                ret = stage_fail(r, s, "SET_TENSOR (weights)", rc);
                /* the server's one other E_LIMIT for SET_TENSOR, an ne[i]
                 * above 2^40, cannot come from a descriptor that
                 * baton_tensor_init accepted: it is the frame's length */
                if (rc == BATON_E_LIMIT) {
                    /* the largest payload this run sends a stage: an
                     * upload chunk, or (split runs) a ubatch's hidden
                     * state, which goes in one SET_TENSOR too */
                    uint64_t need = r->n_stages > 1 ? hidden_state_bytes(r) : 0;
                    uint32_t k;

                    for (k = 0; k < n_items; k++) {
                        const uint64_t chunk = items[k].src.nbytes < UPLOAD_CHUNK
                                                   ? items[k].src.nbytes
                                                   : UPLOAD_CHUNK;

                        if (chunk > need)
                            need = chunk;
                    }
                    stage_msg(r,
                              "tensor '%s' went in a SET_TENSOR message of %" PRIu64
                              " bytes, more than the server's max message size; batond "
                              "--max-message-bytes %" PRIu64
                              " covers every message this run sends (policy "
                              "max_message_bytes, default 1G)\n",
                              it->src.name, (uint64_t)BATON_TENSOR_DESC_BYTES + 16 + n,
                              (uint64_t)BATON_TENSOR_DESC_BYTES + 16 + need);
                }
                goto out;
            }
            pos += n;
            done += n;
        }
        if (tty && (i % 16) == 15)
            fprintf(r->cfg->log, "\rupload: stage %u/%u (%s): %.1f/%.1f MiB", s->index + 1,
                    r->n_stages, s->endpoint, (double)done / 1048576.0,
                    (double)s->weights_bytes / 1048576.0);
    }
    fprintf(r->cfg->log, "%supload: stage %u/%u (%s): %.1f MiB in %u tensors\n", tty ? "\r" : "",
            s->index + 1, r->n_stages, s->endpoint, (double)done / 1048576.0, n_items);
    *bytes_total += (double)done;

    /* KV cache: per local layer k and v, F32 {head_dim, n_ctx, n_head_kv}
     * (kv-head-major, as ATTENTION defines them: core/ops.h) */
    {
        uint64_t koff = 0;

        for (l = 0; l < n_local; l++) {
            struct baton_llama_layer *L = &st->layers[l];

            rc = baton_tensor_init(&L->k_cache, 0, koff, BATON_TYPE_F32, hp->head_dim,
                                   r->cfg->n_ctx, hp->n_head_kv, 1);
            koff = align_up(koff + L->k_cache.nbytes);
            if (rc == 0)
                rc = baton_tensor_init(&L->v_cache, 0, koff, BATON_TYPE_F32, hp->head_dim,
                                       r->cfg->n_ctx, hp->n_head_kv, 1);
            koff = align_up(koff + L->v_cache.nbytes);
            if (rc != 0) {
                stage_msg(r, "KV cache size: %s\n", baton_status_str(rc));
                goto out;
            }
        }
        s->kv_bytes = koff ? koff : ALIGN; /* == kv_bytes (baton_run_kv_cache_bytes) */
        rc = baton_alloc_buffer(s->conn, s->kv_bytes, &s->kv_buf);
        /* only a refusal for memory is the size's fault; E_LIMIT here is the
         * server's table of buffers, full (a size past the server's memory
         * was refused above), and is reported as the server said it */
        if (rc == BATON_E_QUOTA || rc == BATON_E_NOMEM) {
            char why[160], held[32];

            format_bytes(held, sizeof held, s->weights_bytes);
            snprintf(why, sizeof why, "the server refused it: %s (%s), with %s of weights held",
                     baton_status_name(rc), baton_status_str(rc), held);
            ret = kv_fail(r, s, s->kv_bytes, why);
            goto out;
        }
        if (rc != 0) {
            ret = stage_fail(r, s, "ALLOC_BUFFER (KV cache)", rc);
            goto out;
        }
        for (l = 0; l < n_local; l++) {
            st->layers[l].k_cache.buffer = s->kv_buf;
            st->layers[l].v_cache.buffer = s->kv_buf;
        }
    }

    /* I/O tensors */
    {
        struct baton_llama_io *io = &st->io;
        const uint32_t u = r->cfg->n_ubatch;
        uint64_t ioff = 0;
        struct baton_tensor_desc *d[7] = {&io->tokens,   &io->pos,      &io->hidden_in,
                                          &io->hidden_out, &io->last_idx, &io->logits,
                                          &io->argmax};
        const uint32_t types[7] = {BATON_TYPE_I32, BATON_TYPE_I32, BATON_TYPE_F32, BATON_TYPE_F32,
                                   BATON_TYPE_I32, BATON_TYPE_F32, BATON_TYPE_I32};
        const uint64_t ne0[7] = {u, u, hp->n_embd, hp->n_embd, 1, hp->n_vocab, 1};
        const uint64_t ne1[7] = {1, 1, u, u, 1, 1, 1};
        uint32_t k;

        for (k = 0; k < 7; k++) {
            rc = baton_tensor_init(d[k], 0, ioff, types[k], ne0[k], ne1[k], 1, 1);
            if (rc != 0) {
                stage_msg(r, "I/O tensor size: %s\n", baton_status_str(rc));
                goto out;
            }
            ioff = align_up(ioff + d[k]->nbytes);
        }
        s->io_bytes = ioff;
        rc = baton_alloc_buffer(s->conn, s->io_bytes, &s->io_buf);
        if (rc != 0) {
            ret = stage_fail(r, s, "ALLOC_BUFFER (I/O)", rc);
            goto out;
        }
        for (k = 0; k < 7; k++)
            d[k]->buffer = s->io_buf;
    }

    s->cap_leaves = baton_llama_max_leaves(st);
    s->cap_nodes = baton_llama_max_nodes(st);
    s->leaves = calloc(s->cap_leaves, sizeof(*s->leaves));
    s->nodes = calloc(s->cap_nodes, sizeof(*s->nodes));
    if (s->leaves == NULL || s->nodes == NULL) {
        stage_msg(r, "out of memory\n");
        goto out;
    }
    ret = 0;
out:
    free(items);
    return ret;
}

/* ---- direct path ---- */

static const char *outcome_name(uint32_t outcome)
{
    static const char *const names[BATON_COPY_OUTCOME_LIMIT] = {
        "done", "destination not on the source's allow-list", "destination in backoff",
        "connect failed", "handshake failed (or no peer support)", "refused by the destination",
        "peer link failed", "no peer link available"};

    return outcome < BATON_COPY_OUTCOME_LIMIT ? names[outcome] : "?";
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

/* Sets up the direct path at every boundary whose two servers advertise
 * PEER_COPY: one grant on the next stage's hidden_in (the whole tensor, for
 * up to n_ubatch tokens) and its peer-facing address. A boundary that
 * cannot be set up stays on the hub path; its plan line says why. (Whether
 * the source's allow-list names the destination shows only when it copies:
 * run_step reports a "not done".) */
static int setup_direct(struct run *r)
{
    uint32_t i;

    for (i = 0; i + 1 < r->n_stages; i++) {
        struct stage_rt *s = &r->stages[i], *nx = &r->stages[i + 1];
        const struct baton_tensor_desc *in = &nx->st.io.hidden_in;
        const char *ep = nx->peer_endpoint[0] ? nx->peer_endpoint : nx->endpoint;
        const int s_peer = (baton_conn_server_hello(s->conn)->features &
                            BATON_FEATURE_PEER_COPY) != 0;
        const int nx_peer = (baton_conn_server_hello(nx->conn)->features &
                             BATON_FEATURE_PEER_COPY) != 0;
        int rc;

        if (!r->cfg->p2p) {
            fprintf(r->cfg->log, "plan: stage %u -> %u hub (--p2p off)\n", i + 1, i + 2);
            continue;
        }
        if (r->local) { /* in-process stages hold no peer key */
            fprintf(r->cfg->log, "plan: stage %u -> %u hub (in-process stages)\n", i + 1, i + 2);
            continue;
        }
        if (!s_peer || !nx_peer) {
            /* an end without peer support: batond without --peer-key (or older) */
            const struct stage_rt *no = s_peer ? nx : s;

            if (!s_peer && !nx_peer)
                fprintf(r->cfg->log, "plan: stage %u -> %u hub (neither %s nor %s offers the "
                                     "direct path: batond without --peer-key)\n",
                        i + 1, i + 2, s->endpoint, nx->endpoint);
            else
                fprintf(r->cfg->log, "plan: stage %u -> %u hub (stage %u at %s does not offer "
                                     "the direct path: batond without --peer-key)\n",
                        i + 1, i + 2, no->index + 1, no->endpoint);
            continue;
        }
        memset(&s->next_dest, 0, sizeof(s->next_dest));
        rc = resolve_peer(ep, &s->next_dest);
        if (rc != 0) {
            fprintf(r->cfg->log, "plan: stage %u -> %u hub (cannot resolve %s)\n", i + 1, i + 2,
                    ep);
            continue;
        }
        rc = baton_grant_write(nx->conn, in->buffer, in->offset, in->nbytes, s->next_dest.grant);
        if (rc != 0)
            return stage_fail(r, nx, "GRANT_WRITE", rc);
        s->next_dest.grant_offset = 0;
        s->direct = 1;
        r->n_direct++;
        fprintf(r->cfg->log, "plan: stage %u -> %u direct (COPY_TENSOR_TO to %s)\n", i + 1, i + 2,
                ep);
    }
    return 0;
}

/* This session's peer counters on the server of s (a COPY_TENSOR_TO with
 * no destination, which moves nothing). 0, or the call's error. */
static int query_peer(struct stage_rt *s, uint64_t *sent, uint64_t *received)
{
    struct baton_peer_dest none;
    struct baton_copy_result res;
    int rc;

    memset(&none, 0, sizeof(none));
    rc = baton_copy_tensor_to(s->conn, &s->st.io.pos, 0, 0, &none, &res);
    if (rc == 0) {
        *sent = res.peer_bytes_sent;
        *received = res.peer_bytes_received;
    }
    return rc;
}

/* ---- one step ---- */

/* Runs n tokens at positions pos0.. through every stage. On success the last
 * stage's argmax is in *next and, when want_logits, r->logits is filled.
 *
 * Per stage, pipelined: the input (token ids on stage 1; on a later stage
 * its hidden state from r->hidden, unless the previous stage's
 * COPY_TENSOR_TO already put it there), positions, GRAPH_COMPUTE, then
 * either COPY_TENSOR_TO to the next stage (direct) or GET of the hidden
 * state (hub), or the argmax (and logits) on the last stage. A copy that
 * was not done is fetched with GET at once and SET into the next stage.
 * Ordering rule (docs/PROTOCOL.md): the next stage's previous GRAPH_COMPUTE,
 * which reads its hidden_in, was answered in the previous step, before this
 * copy into hidden_in is issued. */
static int run_step(struct run *r, const int32_t *tokens, uint32_t n, uint32_t pos0,
                    int want_logits, int32_t *next)
{
    const uint64_t hidden_bytes = (uint64_t)r->hp.n_embd * n * sizeof(float);
    uint32_t i, si;
    int rc, copied = 0; /* the current stage's hidden_in was written by a peer */

    for (i = 0; i < n; i++)
        r->pos_host[i] = (int32_t)(pos0 + i);
    for (si = 0; si < r->n_stages; si++) {
        struct stage_rt *s = &r->stages[si];
        const struct baton_llama_io *io = &s->st.io;
        struct baton_copy_result res;
        struct baton_gb gb;
        const char *what = "step";
        int direct = !s->st.last && s->direct;

        baton_gb_init(&gb, s->leaves, s->cap_leaves, s->nodes, s->cap_nodes);
        rc = baton_llama_build_stage(&r->hp, &s->st, n, want_logits, &gb);
        if (rc != 0) {
            stage_msg(r, "stage %u: building the graph failed: %s\n", si + 1,
                      baton_status_str(rc));
            return 1;
        }
        if (s->st.first) {
            rc = baton_submit_set_tensor(s->conn, &io->tokens, 0, tokens, (uint64_t)n * 4);
            r->token_bytes += (uint64_t)n * 4;
        } else if (!copied) {
            rc = baton_submit_set_tensor(s->conn, &io->hidden_in, 0, r->hidden, hidden_bytes);
            r->hidden_bytes_hub += hidden_bytes;
            s->hidden_sets++;
        } else {
            rc = 0;
        }
        if (rc == 0) {
            rc = baton_submit_set_tensor(s->conn, &io->pos, 0, r->pos_host, (uint64_t)n * 4);
            r->token_bytes += (uint64_t)n * 4;
        }
        if (rc == 0 && s->st.last && n > 1) {
            const int32_t last = (int32_t)(n - 1);

            rc = baton_submit_set_tensor(s->conn, &io->last_idx, 0, &last, 4);
            r->token_bytes += 4;
        }
        if (rc == 0)
            rc = baton_submit_graph_compute(s->conn, &gb.g);
        if (rc == 0 && direct) {
            rc = baton_submit_copy_tensor_to(s->conn, &io->hidden_out, 0, hidden_bytes,
                                             &s->next_dest, &res);
        } else if (rc == 0 && !s->st.last) {
            rc = baton_submit_get_tensor(s->conn, &io->hidden_out, 0, r->hidden, hidden_bytes);
            r->hidden_bytes_hub += hidden_bytes;
            s->hidden_gets++;
        }
        if (rc == 0 && s->st.last) {
            rc = baton_submit_get_tensor(s->conn, &io->argmax, 0, next, 4);
            r->token_bytes += 4;
            if (rc == 0 && want_logits) {
                rc = baton_submit_get_tensor(s->conn, &io->logits, 0, r->logits,
                                             (uint64_t)r->hp.n_vocab * 4);
                r->logits_bytes += (uint64_t)r->hp.n_vocab * 4;
            }
        }
        if (rc == 0)
            rc = baton_conn_wait(s->conn);
        if (rc != 0) {
            stage_fail(r, s, what, rc);
            /* a step refused by a server limit: its scratch limit or quota
             * and its compute budget grow with the context and the ubatch,
             * its node limit with the layers of the stage (the error does
             * not say which) */
            if (rc == BATON_E_LIMIT || rc == BATON_E_QUOTA) {
                char ctx[96];

                ctx_name(r->cfg, ctx, sizeof ctx);
                stage_msg(r,
                          "a step's scratch and compute on the server grow with the context (%s) "
                          "and the ubatch (--ubatch %u), its nodes with the stage's layers "
                          "(--split); batond --print-policy shows the server's limits\n",
                          ctx, r->cfg->n_ubatch);
                if (r->n_stages > 1)
                    stage_msg(r,
                              "in a split run a ubatch's hidden state (%" PRIu64
                              " bytes) also goes in one message, which must fit the server's "
                              "max message size (batond --max-message-bytes)\n",
                              hidden_state_bytes(r));
            }
            return 1;
        }
        copied = 0;
        if (!direct)
            continue;
        if (res.result != s->last_outcome)
            stage_msg(r, "stage %u -> %u: direct copy %s%s%s\n", si + 1, si + 2,
                      outcome_name(res.result), res.status ? " " : "",
                      res.status ? baton_status_name(-(int)res.status) : "");
        if (res.result != s->last_outcome && res.result != BATON_COPY_DONE)
            stage_msg(r, "stage %u -> %u: copying through the coordinator (hub path) while "
                         "the direct copy is not done\n",
                      si + 1, si + 2);
        s->last_outcome = res.result;
        if (res.result == BATON_COPY_DONE) {
            s->copies_done++;
            copied = 1;
            continue;
        }
        /* not done: this boundary goes through the hub for this step */
        s->copies_not_done++;
        rc = baton_get_tensor(s->conn, &io->hidden_out, 0, r->hidden, hidden_bytes);
        r->hidden_bytes_hub += hidden_bytes;
        s->hidden_gets++;
        if (rc != 0)
            return stage_fail(r, s, "GET_TENSOR (hub fallback)", rc);
    }
    return 0;
}

/* ---- output ---- */

static void print_stats(struct run *r, uint32_t steps)
{
    uint32_t si, c;
    FILE *f = r->cfg->log;

    if (steps == 0)
        return;
    fprintf(f, "stats: per decode step (average over %u steps), %s path%s\n", steps,
            r->n_direct == r->n_stages - 1 && r->n_direct ? "direct"
            : r->n_direct                                  ? "partly direct"
                                                           : "hub",
            r->cfg->p2p ? "" : " (--p2p off)");
    fprintf(f, "  %-6s %-16s %10s %14s %14s\n", "stage", "command", "count", "request B",
            "reply B");
    for (si = 0; si < r->n_stages; si++) {
        for (c = 1; c < BATON_CMD_LIMIT; c++) {
            const struct baton_cmd_stats *st = &r->stages[si].cmd[c];

            if (st->count == 0)
                continue;
            fprintf(f, "  %-6u %-16s %10.2f %14.1f %14.1f\n", si + 1, baton_cmd_name(c),
                    (double)st->count / steps, (double)st->request_bytes / steps,
                    (double)st->reply_bytes / steps);
        }
    }
    fprintf(f, "  hidden-state bytes through the coordinator: %.1f per step\n",
            (double)r->hidden_bytes_hub / steps);
    fprintf(f, "  token id/position/argmax bytes: %.1f per step\n", (double)r->token_bytes / steps);
    fprintf(f, "  logits bytes: %.1f per step\n", (double)r->logits_bytes / steps);
    for (si = 0; si < r->n_stages; si++) {
        const struct stage_rt *s = &r->stages[si];

        fprintf(f, "  stage %u: hub hidden GET %.2f SET %.2f, direct copies done %.2f not done "
                   "%.2f, ",
                si + 1, (double)s->hidden_gets / steps, (double)s->hidden_sets / steps,
                (double)s->copies_done / steps, (double)s->copies_not_done / steps);
        if (s->peer_ok)
            fprintf(f, "peer bytes sent %.1f received %.1f per step (counted by the server, "
                       "this session only)\n",
                    (double)s->peer_sent / steps, (double)s->peer_recv / steps);
        else
            fprintf(f, "peer bytes n/a\n");
    }
}

static void json_cmds(FILE *f, const struct baton_cmd_stats *st, uint32_t steps)
{
    uint32_t c;
    int first = 1;

    fprintf(f, "{");
    for (c = 1; c < BATON_CMD_LIMIT; c++) {
        if (st[c].count == 0)
            continue;
        fprintf(f, "%s\"%s\": {\"count\": %.6g, \"request_bytes\": %.6g, \"reply_bytes\": %.6g}",
                first ? "" : ", ", baton_cmd_name(c), (double)st[c].count / steps,
                (double)st[c].request_bytes / steps, (double)st[c].reply_bytes / steps);
        first = 0;
    }
    fprintf(f, "}");
}

/* Writes the statistics of print_stats as JSON: per decode step averages,
 * commands keyed by their protocol names, per stage and summed. */
static int write_stats_json(struct run *r, const char *path, uint32_t steps)
{
    FILE *f = fopen(path, "w");
    struct baton_cmd_stats sum[BATON_CMD_LIMIT];
    uint32_t si, c;
    const double d = steps ? (double)steps : 1.0;

    if (f == NULL)
        return -1;
    memset(sum, 0, sizeof(sum));
    for (si = 0; si < r->n_stages; si++) {
        for (c = 1; c < BATON_CMD_LIMIT; c++) {
            sum[c].count += r->stages[si].cmd[c].count;
            sum[c].request_bytes += r->stages[si].cmd[c].request_bytes;
            sum[c].reply_bytes += r->stages[si].cmd[c].reply_bytes;
        }
    }
    fprintf(f, "{\"decode_steps\": %u, \"stages\": %u, \"p2p\": %s, \"direct_boundaries\": %u,\n",
            steps, r->n_stages, r->cfg->p2p ? "true" : "false", r->n_direct);
    fprintf(f, " \"per_step\": {\n  \"commands\": ");
    json_cmds(f, sum, steps ? steps : 1);
    fprintf(f, ",\n  \"hidden_state_bytes\": %.6g, \"token_bytes\": %.6g, \"logits_bytes\": %.6g,\n",
            (double)r->hidden_bytes_hub / d, (double)r->token_bytes / d,
            (double)r->logits_bytes / d);
    fprintf(f, "  \"stages\": [\n");
    for (si = 0; si < r->n_stages; si++) {
        const struct stage_rt *s = &r->stages[si];

        fprintf(f, "   {\"stage\": %u, \"endpoint\": \"%s\", \"direct_to_next\": %s, \"commands\": ",
                si + 1, s->endpoint, s->direct ? "true" : "false");
        json_cmds(f, s->cmd, steps ? steps : 1);
        fprintf(f, ",\n    \"hidden_gets\": %.6g, \"hidden_sets\": %.6g, \"copies_done\": %.6g, "
                   "\"copies_not_done\": %.6g, ",
                (double)s->hidden_gets / d, (double)s->hidden_sets / d,
                (double)s->copies_done / d, (double)s->copies_not_done / d);
        if (s->peer_ok)
            fprintf(f, "\"peer_bytes_sent\": %.6g, \"peer_bytes_received\": %.6g}",
                    (double)s->peer_sent / d, (double)s->peer_recv / d);
        else
            fprintf(f, "\"peer_bytes_sent\": null, \"peer_bytes_received\": null}");
        fprintf(f, "%s\n", si + 1 < r->n_stages ? "," : "");
    }
    fprintf(f, "  ]\n }\n}\n");
    return fclose(f) == 0 ? 0 : -1;
}

static int write_ids(const char *path, const int32_t *prompt, size_t n_prompt, const int32_t *gen,
                     size_t n_gen, int with_gap, double min_gap)
{
    FILE *f = fopen(path, "w");
    size_t i;

    if (f == NULL)
        return -1;
    fprintf(f, "{\"prompt\": [");
    for (i = 0; i < n_prompt; i++)
        fprintf(f, "%s%d", i ? ", " : "", prompt[i]);
    fprintf(f, "], \"generated\": [");
    for (i = 0; i < n_gen; i++)
        fprintf(f, "%s%d", i ? ", " : "", gen[i]);
    fprintf(f, "]");
    if (with_gap)
        fprintf(f, ", \"min_top2_gap\": %.6g", min_gap);
    fprintf(f, "}\n");
    return fclose(f) == 0 ? 0 : -1;
}

void baton_run_config_default(struct baton_run_config *cfg)
{
    memset(cfg, 0, sizeof(*cfg));
    cfg->servers = "local";
    cfg->n_predict = 64;
    cfg->n_ctx = 512;
    cfg->ctx_origin = BATON_CTX_DEFAULT;
    cfg->n_ubatch = 512;
    cfg->top_p = 1.0f;
    cfg->n_threads = 1;
    cfg->timeout_ms = 30000;
    cfg->p2p = 1;
    cfg->out = stdout;
    cfg->log = stderr;
    cfg->prog = "baton";
}

void baton_run_config_env(struct baton_run_config *cfg, const char **servers_name)
{
    const char *servers = getenv("BATON_SERVERS"), *key = getenv("BATON_KEY_FILE");

    if (servers && *servers) {
        cfg->servers = servers;
        *servers_name = "BATON_SERVERS";
    }
    if (key && *key) {
        cfg->key_path = key;
        cfg->key_name = "BATON_KEY_FILE";
    }
}

int baton_run(const struct baton_run_config *cfg)
{
    struct run r;
    char err[512];
    double props[BATON_MAX_STAGES];
    uint32_t counts[BATON_MAX_STAGES];
    int n_parts, rc, ret = 1;
    uint32_t i, layer;
    int32_t *prompt_ids = NULL, *gen_ids = NULL;
    size_t n_prompt = 0, n_gen = 0;
    double t_load0, t_load, t_prefill = 0, t_decode = 0, bytes = 0;
    int32_t next = 0;
    char piece[256];

    memset(&r, 0, sizeof(r));
    r.cfg = cfg;
    t_load0 = now_s();
    if (cfg->n_ubatch == 0 || cfg->n_ctx == 0) {
        run_msg(cfg, "--ctx and --ubatch must be at least 1\n");
        return 2;
    }
    /* the stage list and split before the model is read: a typo there is
     * found at once, not after loading */
    n_parts = plan_parts(cfg, "--servers", props);
    if (n_parts < 0)
        return 2;
    rc = baton_gguf_open(cfg->model_path, &r.gguf, err, sizeof(err));
    if (rc != 0) {
        run_msg(cfg, "%s\n", err);
        return 1;
    }
    rc = baton_llama_hparams_load(r.gguf, &r.hp, err, sizeof(err));
    if (rc != 0) {
        run_msg(cfg, "%s: %s\n", cfg->model_path, err);
        goto out;
    }
    rc = baton_tokenizer_from_gguf(r.gguf, &r.tok, err, sizeof(err));
    if (rc != 0) {
        run_msg(cfg, "%s: %s\n", cfg->model_path, err);
        goto out;
    }

    /* tokenize first: a prompt that does not fit is a usage error */
    {
        size_t len = cfg->prompt ? strlen(cfg->prompt) : 0;
        size_t cap = len + 8;

        prompt_ids = calloc(cap, sizeof(*prompt_ids));
        gen_ids = calloc((size_t)cfg->n_predict + 1, sizeof(*gen_ids));
        if (prompt_ids == NULL || gen_ids == NULL) {
            run_msg(cfg, "out of memory (for -n %u)\n", cfg->n_predict);
            goto out;
        }
        if (cfg->prompt_ids) {
            free(prompt_ids);
            prompt_ids = calloc(cfg->n_prompt_ids ? cfg->n_prompt_ids : 1, sizeof(*prompt_ids));
            if (prompt_ids == NULL) {
                run_msg(cfg, "out of memory\n");
                goto out;
            }
            memcpy(prompt_ids, cfg->prompt_ids, cfg->n_prompt_ids * sizeof(*prompt_ids));
            n_prompt = cfg->n_prompt_ids;
            rc = 0;
            for (i = 0; i < n_prompt; i++) {
                if (prompt_ids[i] < 0 || (uint32_t)prompt_ids[i] >= r.hp.n_vocab) {
                    run_msg(cfg, "prompt id %d outside the vocabulary\n", prompt_ids[i]);
                    ret = 2;
                    goto out;
                }
            }
        } else {
            rc = baton_tokenize(r.tok, cfg->prompt, len, baton_tokenizer_add_bos(r.tok),
                                prompt_ids, cap, &n_prompt);
        }
        if (rc == 0 && n_prompt == 0) {
            run_msg(cfg, "the prompt gives no tokens (and the model has no BOS)\n");
            ret = 2;
            goto out;
        }
        if (rc != 0) {
            run_msg(cfg, "cannot tokenize the prompt: %s\n", baton_status_str(rc));
            goto out;
        }
        if ((uint64_t)n_prompt + cfg->n_predict > cfg->n_ctx) {
            const unsigned long long need = (unsigned long long)n_prompt + cfg->n_predict;
            char hint[64];

            if (need <= UINT32_MAX)
                snprintf(hint, sizeof hint, "give --ctx %llu or more", need);
            else
                snprintf(hint, sizeof hint, "lower -n (--ctx is at most %u)", UINT32_MAX);
            run_msg(cfg, "prompt (%zu tokens) + -n %u = %llu exceeds %s %u%s; %s\n", n_prompt,
                    cfg->n_predict, need,
                    cfg->ctx_origin == BATON_CTX_DEFAULT  ? "the default --ctx"
                    : cfg->ctx_origin == BATON_CTX_BENCH ? "a KV cache of"
                                                          : "the context --ctx",
                    cfg->n_ctx, cfg->ctx_origin == BATON_CTX_BENCH ? " positions" : "", hint);
            ret = 2;
            goto out;
        }
    }

    /* a context past the one the model was trained for still runs (RoPE
     * extrapolates), but the output degrades: say so once */
    if (cfg->n_ctx > r.hp.n_ctx_train) {
        char trained[96];

        baton_llama_ctx_train_desc(&r.hp, trained, sizeof trained);
        run_msg(cfg, "note: a context of %u positions is more than the model was trained for "
                     "(%s); text past that may degrade\n",
                cfg->n_ctx, trained);
    }

    /* plan: n_parts and props from plan_parts */
    if (baton_split_plan(r.hp.n_layer, props, (size_t)n_parts, counts) != 0) {
        run_msg(cfg, "cannot split %u layers into %d stages with --split %s\n",
                r.hp.n_layer, n_parts, cfg->split ? cfg->split : "(default)");
        ret = 2;
        goto out;
    }
    /* a KV cache no machine could hold is a usage error, found before any
     * connection; whether a server grants the rest is known at its upload */
    for (i = 0; i < (uint32_t)n_parts; i++) {
        uint64_t kv_bytes;

        if (baton_run_kv_cache_bytes(r.hp.head_dim, r.hp.n_head_kv, cfg->n_ctx, counts[i],
                                     &kv_bytes) != 0) {
            char ctx[96];

            ctx_name(cfg, ctx, sizeof ctx);
            run_msg(cfg, "%s needs more than 2^64 bytes of KV cache on stage %u (%u layers)\n",
                    ctx, i + 1, counts[i]);
            ret = 2;
            goto out;
        }
    }
    r.n_stages = (uint32_t)n_parts;
    r.stages = calloc(r.n_stages, sizeof(*r.stages));
    r.hidden = calloc((size_t)r.hp.n_embd * cfg->n_ubatch, sizeof(float));
    r.logits = calloc(r.hp.n_vocab, sizeof(float));
    r.pos_host = calloc(cfg->n_ubatch, sizeof(int32_t));
    r.sample_scratch = calloc(r.hp.n_vocab, sizeof(*r.sample_scratch));
    if (!r.stages || !r.hidden || !r.logits || !r.pos_host || !r.sample_scratch) {
        run_msg(cfg, "out of memory\n");
        goto out;
    }
    fprintf(cfg->log, "model: %s: llama, %u layers, n_embd %u, %u heads (%u kv), n_ff %u, vocab %u\n",
            cfg->model_path, r.hp.n_layer, r.hp.n_embd, r.hp.n_head, r.hp.n_head_kv, r.hp.n_ff,
            r.hp.n_vocab);
    layer = 0;
    for (i = 0; i < r.n_stages; i++) {
        struct baton_llama_stage *st = &r.stages[i].st;

        st->layer_begin = layer;
        st->layer_end = layer + counts[i];
        st->first = i == 0;
        st->last = i + 1 == r.n_stages;
        layer += counts[i];
    }
    rc = connect_stages(&r, r.n_stages);
    if (rc != 0) {
        ret = rc;
        goto out;
    }
    for (i = 0; i < r.n_stages; i++) {
        const struct baton_llama_stage *st = &r.stages[i].st;

        fprintf(cfg->log, "plan: stage %u %-21s layers %u..%u (%u)%s%s\n", i + 1,
                r.stages[i].endpoint, st->layer_begin, st->layer_end - 1,
                st->layer_end - st->layer_begin, st->first ? " +embedding" : "",
                st->last ? " +output head" : "");
    }
    for (i = 0; i < r.n_stages; i++)
        if (upload_stage(&r, &r.stages[i], &bytes) != 0)
            goto out;
    if (setup_direct(&r) != 0)
        goto out;
    t_load = now_s() - t_load0;

    /* the prompt, then the continuation as it is generated */
    if (!cfg->quiet && !cfg->prompt_ids) {
        fputs(cfg->prompt, cfg->out);
        fflush(cfg->out);
        r.text_open = cfg->prompt[0] != '\0';
    }
    /* prefill in ubatches; the last one yields the first generated token */
    {
        double t0 = now_s();
        size_t done = 0;
        struct baton_sampler smp;
        const int want_logits = cfg->temp > 0.0f || cfg->report_gap;

        baton_sampler_init(&smp, cfg->temp, cfg->top_k, cfg->top_p, cfg->seed);
        while (done < n_prompt) {
            uint32_t n = (uint32_t)((n_prompt - done) < cfg->n_ubatch ? (n_prompt - done)
                                                                       : cfg->n_ubatch);
            int last = done + n == n_prompt;

            if (run_step(&r, prompt_ids + done, n, (uint32_t)done, last && want_logits, &next) != 0)
                goto out;
            done += n;
            if (last && cfg->report_gap)
                r.min_gap = top2_gap(r.logits, r.hp.n_vocab);
        }
        t_prefill = now_s() - t0;
        if (cfg->temp > 0.0f)
            next = baton_sampler_sample(&smp, r.logits, r.hp.n_vocab, r.sample_scratch);

        /* the decode window starts here: the servers' peer counters are
         * read first (outside the window's command counts) */
        for (i = 0; i < r.n_stages; i++) {
            struct stage_rt *s = &r.stages[i];

            if (cfg->stats || cfg->stats_json)
                s->peer_ok = query_peer(s, &s->peer_sent0, &s->peer_recv0) == 0;
            baton_conn_reset_stats(s->conn);
            s->copies_done = s->copies_not_done = s->hidden_gets = s->hidden_sets = 0;
        }
        r.hidden_bytes_hub = 0;
        r.token_bytes = 0;
        r.logits_bytes = 0;
        t0 = now_s();
        while (n_gen < cfg->n_predict) {
            int32_t cur;

            if (next < 0 || (uint32_t)next >= r.hp.n_vocab) {
                stage_msg(&r, "stage %u returned token id %d outside the vocabulary\n",
                          r.n_stages, next);
                goto out;
            }
            gen_ids[n_gen++] = next;
            if (next == baton_tokenizer_eos(r.tok) && !cfg->ignore_eos)
                break;
            if (!cfg->quiet) {
                int32_t prev = n_gen >= 2 ? gen_ids[n_gen - 2] : prompt_ids[n_prompt - 1];
                size_t plen = 0;

                if (baton_token_to_piece(r.tok, next, prev, piece, sizeof(piece), &plen) == 0 &&
                    plen > 0) {
                    fwrite(piece, 1, plen, cfg->out);
                    r.text_open = 1;
                }
                fflush(cfg->out);
            }
            if (n_gen == cfg->n_predict)
                break;
            cur = next;
            if (run_step(&r, &cur, 1, (uint32_t)(n_prompt + n_gen - 1), want_logits, &next) != 0)
                goto out;
            if (cfg->report_gap) {
                double gap = top2_gap(r.logits, r.hp.n_vocab);

                if (gap < r.min_gap)
                    r.min_gap = gap;
            }
            if (cfg->temp > 0.0f)
                next = baton_sampler_sample(&smp, r.logits, r.hp.n_vocab, r.sample_scratch);
        }
        t_decode = now_s() - t0;
        /* the window ends: its command counts first, then the peer counters */
        for (i = 0; i < r.n_stages; i++) {
            struct stage_rt *s = &r.stages[i];
            uint32_t c;
            uint64_t sent, received;

            for (c = 1; c < BATON_CMD_LIMIT; c++)
                s->cmd[c] = baton_conn_stats(s->conn, c);
            if (s->peer_ok && query_peer(s, &sent, &received) == 0) {
                s->peer_sent = sent - s->peer_sent0;
                s->peer_recv = received - s->peer_recv0;
            } else {
                s->peer_ok = 0;
            }
        }
    }
    if (!cfg->quiet) {
        fputc('\n', cfg->out);
        fflush(cfg->out);
        r.text_open = 0;
    }
    {
        uint32_t decode_steps = n_gen > 0 ? (uint32_t)(n_gen - 1) : 0;

        fprintf(cfg->log,
                "summary: prompt %zu tokens, generated %zu tokens, load %.2f s (%.1f MiB), "
                "prefill %.1f tok/s, decode %.1f tok/s, stages %u\n",
                n_prompt, n_gen, t_load, bytes / 1048576.0,
                t_prefill > 0 ? (double)n_prompt / t_prefill : 0.0,
                t_decode > 0 && decode_steps ? (double)decode_steps / t_decode : 0.0, r.n_stages);
        if (cfg->stats)
            print_stats(&r, decode_steps);
        if (cfg->stats_json && write_stats_json(&r, cfg->stats_json, decode_steps) != 0) {
            run_msg(cfg, "--stats-json %s: cannot write: %s\n", cfg->stats_json,
                    strerror(errno));
            goto out;
        }
        if (cfg->result) {
            struct baton_run_result *res = cfg->result;
            uint32_t c;

            memset(res, 0, sizeof(*res));
            res->n_prompt = n_prompt;
            res->n_gen = n_gen;
            res->t_load_s = t_load;
            res->t_prefill_s = t_prefill;
            res->t_decode_s = t_decode;
            res->n_stages = r.n_stages;
            res->decode_steps = decode_steps;
            for (i = 0; i < r.n_stages; i++) {
                const struct stage_rt *s = &r.stages[i];

                for (c = 1; c < BATON_CMD_LIMIT; c++)
                    res->cmd[i][c] = s->cmd[c];
                res->copies_done[i] = s->copies_done;
                res->copies_not_done[i] = s->copies_not_done;
                res->hidden_gets[i] = s->hidden_gets;
                res->hidden_sets[i] = s->hidden_sets;
                res->peer_stats_ok[i] = s->peer_ok;
                res->peer_bytes_sent[i] = s->peer_sent;
                res->peer_bytes_received[i] = s->peer_recv;
            }
            res->hidden_bytes_hub = r.hidden_bytes_hub;
            res->token_bytes = r.token_bytes;
            res->logits_bytes = r.logits_bytes;
            res->n_direct = r.n_direct;
        }
    }
    if (cfg->ids_path && write_ids(cfg->ids_path, prompt_ids, n_prompt, gen_ids, n_gen,
                                       cfg->report_gap, r.min_gap) != 0) {
        run_msg(cfg, "--ids-file %s: cannot write: %s\n", cfg->ids_path, strerror(errno));
        goto out;
    }
    ret = 0;
out:
    if (r.stages) {
        for (i = 0; i < r.n_stages; i++) {
            struct stage_rt *s = &r.stages[i];

            if (s->conn)
                baton_conn_close(s->conn);
            free(s->st.layers);
            free(s->leaves);
            free(s->nodes);
        }
    }
    if (r.local)
        baton_server_destroy(r.local);
    baton_key_free(r.key);
    free(r.stages);
    free(r.hidden);
    free(r.logits);
    free(r.pos_host);
    free(r.sample_scratch);
    free(prompt_ids);
    free(gen_ids);
    baton_tokenizer_free(r.tok);
    baton_gguf_close(r.gguf);
    return ret;
}
