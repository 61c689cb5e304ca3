/* batond: the baton tensor server (DESIGN.md, docs/PROTOCOL.md).
 *
 *   batond [--host 127.0.0.1] [--port 7340] [--port-file F] [--threads N]
 *          [--key FILE [--peer-key FILE] [--encrypt]] [--insecure-no-auth]
 *          [--policy FILE] [--SETTING VALUE]... [--print-policy]
 *          [--no-seccomp] [--quiet] [--help] [--version]
 *
 * Every limit comes from the policy (src/server/policy.h,
 * policy/batond.policy): defaults, then the --policy file, then command-line
 * flags, which override the file wherever they stand. Each policy key is
 * also a flag (--max-connections 16, --handshake-timeout 1s; a --peer on the
 * command line replaces the file's peer list, a --client its client lines;
 * --key/--peer-key override
 * key_file/peer_key_file; with neither, under systemd, client.key and
 * peer.key of $CREDENTIALS_DIRECTORY, from LoadCredential=, are the keys:
 * packaging/batond.service). --print-policy prints the resulting policy and
 * exits. After setup (keys loaded, listening, port file written) batond
 * installs the seccomp allow-list of policy/seccomp.list for all its
 * threads (src/server/sandbox.h); --no-seccomp skips it, for sanitizer and
 * debugging runs (sanitizer builds skip it by default).
 *
 * Listens on loopback unless given a key (--key) or --insecure-no-auth
 * (SECURITY.md). --port 0 picks a free port; the port actually bound is
 * written (atomically: temp file in
 * the same directory, then rename) to --port-file once listening, so a test
 * can start batond and wait for that file. SIGTERM/SIGINT/SIGHUP drain the server
 * (no new connections, requests in flight finish) and exit 0. Exit 1 on a
 * runtime or file failure (a key file or the policy file refused, the
 * address does not resolve or cannot be bound), 2 on a usage error.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netdb.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <sodium.h>

#include "auth/auth.h"
#include "baton/status.h"
#include "cli/batond_args.h"
#include "cli/cli.h"
#include "compute/compute.h"
#include "core/limits.h"
#include "net/net.h"
#include "server/log.h"
#include "server/policy.h"
#include "server/sandbox.h"
#include "server/server.h"

static struct baton_server *g_server;

static void on_signal(int sig)
{
    (void)sig;
    if (g_server)
        baton_server_stop(g_server);
}

/* Memory settings that cannot work as written, said at startup (they are
 * accepted: a quota above what exists only lets the kernel refuse first):
 * total_memory_bytes above this machine's memory, a session's quota (the
 * policy's or a client line's) above the total, which caps it. */
static void warn_memory(const struct baton_server_config *cfg)
{
    const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    const unsigned long long ram =
        pages > 0 && page > 0 ? (unsigned long long)pages * (unsigned long long)page : 0;

    if (ram != 0 && cfg->total_memory_bytes > ram)
        baton_log(BATON_LOG_WARNING, "startup", NULL, 0,
                  "total_memory_bytes (%llu MiB) is more than this machine's memory (%llu MiB): "
                  "allocations may fail, or the kernel stop batond, before the quota refuses them",
                  (unsigned long long)(cfg->total_memory_bytes >> 20), ram >> 20);
    if (cfg->session_memory_bytes > cfg->total_memory_bytes)
        baton_log(BATON_LOG_WARNING, "startup", NULL, 0,
                  "session_memory_bytes (%llu MiB) is more than total_memory_bytes (%llu MiB), "
                  "which caps every session",
                  (unsigned long long)(cfg->session_memory_bytes >> 20),
                  (unsigned long long)(cfg->total_memory_bytes >> 20));
    for (uint32_t i = 0; i < cfg->n_clients; i++)
        if (cfg->clients[i].session_memory_bytes > cfg->total_memory_bytes)
            baton_log(BATON_LOG_WARNING, "startup", NULL, 0,
                      "client key %s: session_memory_bytes (%llu MiB) is more than "
                      "total_memory_bytes (%llu MiB), which caps every session",
                      cfg->clients[i].name,
                      (unsigned long long)(cfg->clients[i].session_memory_bytes >> 20),
                      (unsigned long long)(cfg->total_memory_bytes >> 20));
}

/* Writes "<port>\n" to path via a temporary file in the same directory and
 * rename(2), so a reader never sees a partial file. */
static int write_port_file(const char *path, uint16_t port)
{
    char tmp[PATH_MAX], line[16];
    int n = snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid());
    if (n < 0 || (size_t)n >= sizeof tmp)
        return -1;
    int len = snprintf(line, sizeof line, "%u\n", (unsigned)port);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0644);
    if (fd < 0)
        return -1;
    int ok = write(fd, line, (size_t)len) == len && fsync(fd) == 0;
    struct stat st;
    ok = (close(fd) == 0) && ok;
    /* rename replaces what is at path: never a device or a FIFO (as root,
     * --port-file /dev/null would remove /dev/null) */
    if (ok && lstat(path, &st) == 0 && !S_ISREG(st.st_mode) && !S_ISLNK(st.st_mode)) {
        errno = EEXIST;
        ok = 0;
    }
    if (!ok || rename(tmp, path) != 0) {
        unlink(tmp);
        return -1;
    }
    return 0;
}

/* Usage rules of the key options. key_cred / peer_key_cred: that key is
 * the service manager's credential (named so, as the user gave no option).
 * Returns 0 or exit code 2. */
static int check_auth_options(const char *key_path, const char *peer_key_path, int key_cred,
                              int peer_key_cred, const struct baton_server_config *cfg,
                              uint32_t n_peers, uint32_t n_clients)
{
    /* a named client key (policy `client` lines) serves as a client key */
    const char *any_client = key_path ? key_path : n_clients ? "client" : NULL;
    if (peer_key_path && !any_client) {
        batond_say("usage", "%s needs a client key: --key (key_file) or a named client "
                            "(--client or a policy `client` line)",
                   peer_key_cred ? "the credential peer.key" : "--peer-key (peer_key_file)");
        return 2;
    }
    if (n_peers && !peer_key_path) {
        batond_say("usage", "--peer (peer) needs --peer-key (peer_key_file): hidden states go only to "
                     "servers that prove the peer key");
        return 2;
    }
    if (cfg->encrypt && !any_client) {
        batond_say("usage", "--encrypt (encrypt = yes) needs --key (key_file) or a client line");
        return 2;
    }
    if (cfg->insecure_no_auth && any_client) {
        batond_say("usage", "--insecure-no-auth contradicts %s",
                   key_cred ? "the credential client.key" : "--key (and client lines)");
        return 2;
    }
    return 0;
}

/* The secure default, once host resolved: a non-loopback address needs a
 * client key (--key or a client line), or --insecure-no-auth. Returns 0 or
 * exit code 2. */
static int check_listen_address(const char *host, int any_client, int insecure_no_auth)
{
    if (!any_client && !insecure_no_auth && !baton_net_host_is_loopback(host)) {
        batond_say("usage",
            "refusing to listen on %s: it is not a loopback address and no key was given "
            "(anyone who reaches the port could use this server's memory); use --key FILE "
            "(baton keygen), or --insecure-no-auth on a trusted network",
            host);
        return 2;
    }
    return 0;
}

/* Whether the file at other (a key or a policy file batond reads) is the
 * one port_st describes, a regular file at the port file's path, which
 * write_port_file's rename replaces. (A link there is replaced itself, not
 * what it points to: the caller takes lstat's view, so it is no clash.) */
static int port_file_replaces(const struct stat *port_st, const char *other)
{
    struct stat st;

    return other != NULL && stat(other, &st) == 0 && st.st_dev == port_st->st_dev &&
           st.st_ino == port_st->st_ino;
}

/* --port-file must not name a file batond reads: the port file replaces
 * the file at its path, so the key (its only copy, mode 0600) or the policy
 * would become a line with the port. Checked before anything is read or
 * bound. argv: as split (--policy FILE as two words); key_opt, peer_opt:
 * how the messages name the keys' options. Returns 0, or exit code 2 after
 * a message naming both options. */
static int check_port_file(const char *port_file, int argc, char **argv, const char *key_path,
                           const char *key_opt, const char *peer_key_path, const char *peer_opt,
                           const struct baton_policy *pol)
{
    struct stat pst;
    const char *opt = NULL, *name = NULL;
    char client_opt[BATON_POLICY_CLIENT_NAME_BYTES + 16];

    if (port_file == NULL || lstat(port_file, &pst) != 0 || !S_ISREG(pst.st_mode))
        return 0;
    if (port_file_replaces(&pst, key_path)) {
        opt = key_opt;
        name = key_path;
    } else if (port_file_replaces(&pst, peer_key_path)) {
        opt = peer_opt;
        name = peer_key_path;
    }
    for (uint32_t i = 0; !opt && i < pol->n_clients && i < BATON_POLICY_MAX_CLIENTS; i++)
        if (port_file_replaces(&pst, pol->clients[i].key_file)) {
            snprintf(client_opt, sizeof client_opt, "client %s", pol->clients[i].name);
            opt = client_opt;
            name = pol->clients[i].key_file;
        }
    for (int i = 1; !opt && i + 1 < argc; i++)
        if (strcmp(argv[i], "--policy") == 0 && port_file_replaces(&pst, argv[i + 1])) {
            opt = "--policy";
            name = argv[i + 1];
        }
    if (!opt)
        return 0;
    batond_say("usage", "--port-file %s and %s %s are the same file; the port file would "
                        "replace it (give the port file a path of its own)",
               port_file, opt, name);
    return 2;
}

/* Opens a key file (auth.h refuses group/world-accessible, foreign,
 * symlinked or wrongly sized files; a systemd credential, with credential
 * set, by baton_key_open_credential's rules). Prints the reason and returns
 * -1 on failure. */
static int load_key(const char *opt, const char *path, int credential, struct baton_key **out)
{
    char err[256];
    int rc = baton_auth_init();
    if (rc == 0)
        rc = credential ? baton_key_open_credential(path, out, err, sizeof err)
                        : baton_key_open(path, out, err, sizeof err);
    else
        snprintf(err, sizeof err, "no random source (libsodium)");
    if (rc != 0) {
        baton_log(BATON_LOG_ERR, "startup", NULL, 0, "%s: %s", opt, err);
        return -1;
    }
    return 0;
}

/* Under systemd, LoadCredential=client.key:PATH (and peer.key) puts a key
 * into $CREDENTIALS_DIRECTORY (systemd.exec(5), "Credentials"). Sets out to
 * $CREDENTIALS_DIRECTORY/name and returns 1 when that variable holds an
 * absolute path and something is there; else 0. */
static int credential_path(const char *name, char *out, size_t len)
{
    const char *dir = getenv("CREDENTIALS_DIRECTORY");
    struct stat st;
    int n;

    if (dir == NULL || dir[0] != '/')
        return 0;
    n = snprintf(out, len, "%s/%s", dir, name);
    return n > 0 && (size_t)n < len && lstat(out, &st) == 0;
}

/* 0 if host resolves to an address to listen on; else prints why and
 * returns 1 (the name may resolve later: a runtime failure, not usage). */
static int check_host_resolves(const char *host)
{
    struct addrinfo hints, *res = NULL;
    int rc;

    memset(&hints, 0, sizeof hints);
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_PASSIVE;
    rc = getaddrinfo(host, NULL, &hints, &res);
    if (rc != 0 || !res) {
        batond_say("startup", "cannot listen on %s: the name does not resolve (%s)", host,
            rc != 0 ? gai_strerror(rc) : "no address");
        return 1;
    }
    freeaddrinfo(res);
    return 0;
}

int main(int argc, char **argv)
{
    static struct baton_policy pol;
    char err[512];
    int print_policy = 0;
    int use_seccomp = !baton_sandbox_sanitizer_build();
    const char *host, *port_file = NULL;
    const char *key_path = NULL, *peer_key_path = NULL;
    static char cred_key[PATH_MAX], cred_peer_key[PATH_MAX];
    int key_is_credential = 0, peer_key_is_credential = 0;
    struct baton_key *client_key = NULL, *peer_key = NULL;
    struct baton_key *named_keys[BATON_POLICY_MAX_CLIENTS] = {0};
    uint16_t port, bound = 0;
    struct stat pst;
    struct baton_server_config cfg;
    const char *kernels;
    int rc, code = 1, isa_ignored = 0;
    if (baton_cli_hold_std_fds() != 0)
        return 1; /* no /dev/null: nowhere to say it either */
    baton_log_set_format(batond_log_format_from_args(argc, argv));
    argv = batond_split_eq_args(argc, argv, &argc);
    if (argv == NULL) {
        if (argc < 0)
            return 2; /* a flag given a value: said */
        batond_say("startup", "out of memory");
        return 1;
    }
    baton_server_config_default(&cfg);
    baton_policy_default(&pol);
    rc = batond_load_policy_arg(argc, argv, &pol);
    if (rc != 0)
        return rc;
    {
        struct batond_options o = {.pol = &pol, .cfg = &cfg, .use_seccomp = use_seccomp};

        rc = batond_parse_options(argc, argv, &o);
        if (rc != BATOND_ARGS_RUN)
            return rc;
        print_policy = o.print_policy;
        use_seccomp = o.use_seccomp;
        port_file = o.port_file;
        key_path = o.key_path;
        peer_key_path = o.peer_key_path;
    }
    if (print_policy) {
        size_t need = baton_policy_format(&pol, NULL, 0);
        char *text = malloc(need + 1);
        if (!text)
            return 1;
        baton_policy_format(&pol, text, need + 1);
        fputs(text, stdout);
        free(text);
        return 0;
    }
    host = pol.bind;
    port = pol.port;
    /* a key file that the policy named is called by its key there, not
     * --key, when it is refused */
    const char *key_opt = "--key", *peer_key_opt = "--peer-key";
    if (!key_path && pol.key_file[0]) {
        key_path = pol.key_file;
        key_opt = "key_file (policy)";
    }
    if (!peer_key_path && pol.peer_key_file[0]) {
        peer_key_path = pol.peer_key_file;
        peer_key_opt = "peer_key_file (policy)";
    }
    /* no key configured: the service manager's credentials, if any */
    if (!key_path && credential_path("client.key", cred_key, sizeof cred_key)) {
        key_path = cred_key;
        key_is_credential = 1;
    }
    if (!peer_key_path && credential_path("peer.key", cred_peer_key, sizeof cred_peer_key)) {
        peer_key_path = cred_peer_key;
        peer_key_is_credential = 1;
    }
    {
        /* the options' usage errors first, before baton_policy_apply looks
         * up the peers' names (and check_host_resolves the host's; the
         * address's rule, check_listen_address, comes after it) */
        struct baton_server_config pre = cfg;
        pre.encrypt = pre.encrypt || pol.encrypt;
        rc = check_auth_options(key_path, peer_key_path, key_is_credential,
                                peer_key_is_credential, &pre, pol.n_peers, pol.n_clients);
        if (rc != 0)
            return rc;
    }
    rc = check_port_file(port_file, argc, argv, key_path,
                         key_is_credential ? "the credential client.key" : "--key (key_file)",
                         peer_key_path,
                         peer_key_is_credential ? "the credential peer.key"
                                                : "--peer-key (peer_key_file)",
                         &pol);
    if (rc != 0)
        return rc;
    /* process hardening that needs nothing else: no core file can hold a
     * key from here on */
    struct rlimit no_core = {0, 0};
    setrlimit(RLIMIT_CORE, &no_core);
    signal(SIGPIPE, SIG_IGN);

    /* keys: loaded and compared (usage errors too) before any name is
     * looked up and anything listens */
    if (key_path && load_key(key_is_credential ? "credential client.key" : key_opt, key_path,
                             key_is_credential, &client_key) != 0)
        goto out;
    if (peer_key_path &&
        load_key(peer_key_is_credential ? "credential peer.key" : peer_key_opt, peer_key_path,
                 peer_key_is_credential, &peer_key) != 0)
        goto out;
    /* one key for both roles would let every client open a peer-role link
     * and write into another session's granted range (SECURITY.md) */
    if (client_key && peer_key &&
        sodium_memcmp(baton_key_bytes(client_key), baton_key_bytes(peer_key), BATON_KEY_BYTES) ==
            0) {
        batond_say("usage", "%s: %s holds the same key as %s %s; the peer key must be its own "
                            "(baton keygen)",
                   peer_key_is_credential ? "the credential peer.key" : "--peer-key",
                   peer_key_path, key_is_credential ? "the credential client.key" : "--key",
                   key_path);
        code = 2;
        goto out;
    }
    /* named client keys, each its own: no two alike, none equal to the
     * client or peer key */
    for (uint32_t i = 0; i < pol.n_clients; i++) {
        char opt[64];
        snprintf(opt, sizeof opt, "client %s", pol.clients[i].name);
        if (load_key(opt, pol.clients[i].key_file, 0, &named_keys[i]) != 0)
            goto out;
        const uint8_t *kb = baton_key_bytes(named_keys[i]);
        const char *same = NULL;
        for (uint32_t j = 0; j < i && !same; j++)
            if (sodium_memcmp(kb, baton_key_bytes(named_keys[j]), BATON_KEY_BYTES) == 0)
                same = pol.clients[j].key_file;
        const char *what = "client line";
        if (!same && client_key &&
            sodium_memcmp(kb, baton_key_bytes(client_key), BATON_KEY_BYTES) == 0) {
            same = key_path;
            what = key_is_credential ? "credential client.key" : "--key (key_file)";
        }
        if (!same && peer_key && sodium_memcmp(kb, baton_key_bytes(peer_key), BATON_KEY_BYTES) == 0) {
            same = peer_key_path;
            what = peer_key_is_credential ? "credential peer.key" : "--peer-key (peer_key_file)";
        }
        if (same) {
            batond_say("usage", "client %s: %s holds the same key as the %s %s; every client key must "
                         "be its own (baton keygen)",
                pol.clients[i].name, pol.clients[i].key_file, what, same);
            code = 2;
            goto out;
        }
    }
    {
        /* the policy gives every limit; quiet and insecure_no_auth are flags
         * only, and --encrypt adds to `encrypt` */
        struct baton_server_config flags = cfg;
        if (baton_policy_apply(&pol, &cfg, err, sizeof err) != 0) {
            /* "policy:" only where a --policy file took part: a setting
             * given on the command line alone is named as given */
            int file = 0;
            for (int i = 1; i < argc; i++)
                file = file || strcmp(argv[i], "--policy") == 0;
            batond_say("startup", "%s%s", file ? "policy: " : "", err);
            goto out;
        }
        cfg.quiet = flags.quiet;
        cfg.insecure_no_auth = flags.insecure_no_auth;
        cfg.encrypt = cfg.encrypt || flags.encrypt;
    }

    /* the host's name, then the secure default for its address */
    if (check_host_resolves(host) != 0)
        goto out;
    rc = check_listen_address(host, key_path != NULL || pol.n_clients > 0, cfg.insecure_no_auth);
    if (rc != 0) {
        code = rc;
        goto out;
    }
    for (uint32_t i = 0; i < pol.n_clients; i++)
        cfg.clients[i].key = named_keys[i]; /* baton_policy_apply set the rest */
    cfg.client_key = client_key;
    cfg.peer_key = peer_key;
    if (cfg.insecure_no_auth)
        baton_log(BATON_LOG_WARNING, "startup", NULL, 0,
                  "WARNING: --insecure-no-auth: no authentication on %s; anyone who can reach "
                  "this port can use this server's memory",
                  host);

    rc = baton_server_create(&cfg, &g_server);
    if (rc != 0) {
        baton_log(BATON_LOG_ERR, "startup", NULL, 0, "cannot create server: %s",
                  baton_status_str(rc));
        goto out;
    }
    rc = baton_server_listen(g_server, host, port, &bound);
    if (rc != 0) {
        int saved = errno; /* a socket, bind or listen failure: its reason says it all */

        baton_log(BATON_LOG_ERR, "startup", NULL, 0, "cannot listen on %s%s%s:%u: %s",
                  strchr(host, ':') ? "[" : "", host, strchr(host, ':') ? "]" : "",
                  (unsigned)port, rc == BATON_E_IO ? strerror(saved) : baton_status_str(rc));
        goto out;
    }

    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL); /* the terminal it was started from closed */

    if (port_file && lstat(port_file, &pst) == 0 && !S_ISREG(pst.st_mode) &&
        !S_ISLNK(pst.st_mode)) {
        baton_log(BATON_LOG_ERR, "startup", NULL, 0,
                  "--port-file %s: not a regular file (the port file replaces the file at its "
                  "path)",
                  port_file);
        goto out;
    }
    if (port_file && write_port_file(port_file, bound) != 0) {
        baton_log(BATON_LOG_ERR, "startup", NULL, 0, "cannot write port file %s: %s", port_file,
                  strerror(errno));
        goto out;
    }
    kernels = baton_compute_kernels(&isa_ignored);
    if (isa_ignored)
        baton_log(BATON_LOG_WARNING, "startup", NULL, 0,
                  "BATON_CPU_ISA=%s ignored (not scalar, avx2 or avx512): kernels %s",
                  getenv("BATON_CPU_ISA"), kernels);
    warn_memory(&cfg);
    /* last step of setup: from here on only the calls of policy/seccomp.list */
    if (use_seccomp && baton_sandbox_install(err, sizeof err) != 0) {
        baton_log(BATON_LOG_ERR, "startup", NULL, 0, "%s", err);
        goto out;
    }
    {
        const struct baton_log_field f[] = {
            {"host", host, 0},
            {"port", NULL, bound},
            {"protocol", NULL, BATON_PROTOCOL_VERSION},
            {"threads", NULL, cfg.n_threads},
            {"total_memory_mib", NULL, (long long)(cfg.total_memory_bytes >> 20)},
            {"auth", client_key || cfg.n_clients ? "key" : "none", 0},
            {"seccomp", use_seccomp ? "on" : "off", 0},
            {"kernels", kernels, 0},
        };
        baton_log(BATON_LOG_NOTICE, "startup", f, sizeof f / sizeof f[0],
                  "listening on %s%s%s:%u (protocol %u, %u compute thread%s, %llu MiB, "
                  "kernels %s)",
                  strchr(host, ':') ? "[" : "", host, strchr(host, ':') ? "]" : "",
                  (unsigned)bound, BATON_PROTOCOL_VERSION, cfg.n_threads,
                  cfg.n_threads == 1 ? "" : "s", (unsigned long long)(cfg.total_memory_bytes >> 20),
                  kernels);
    }
    if (!use_seccomp)
        baton_log(BATON_LOG_WARNING, "startup", NULL, 0,
                  "seccomp allow-list not installed (--no-seccomp or a sanitizer build)");
    if (client_key || cfg.n_clients)
        baton_log(BATON_LOG_NOTICE, "startup", NULL, 0,
                  "authentication required (%s%s%s%s), frames MAC'd%s",
                  client_key ? "client key" : "named client keys",
                  peer_key ? ", peer key" : "", client_key && cfg.n_clients ? ", " : "",
                  client_key && cfg.n_clients ? "named client keys" : "",
                  cfg.encrypt ? " and encrypted" : "");
    for (uint32_t i = 0; i < cfg.n_clients; i++)
        baton_log(BATON_LOG_NOTICE, "startup", NULL, 0,
                  "client key %s: %u connections, %llu bytes a session, %llu FLOP a graph, "
                  "%u peer links",
                  cfg.clients[i].name, cfg.clients[i].max_connections,
                  (unsigned long long)(cfg.clients[i].session_memory_bytes
                                           ? cfg.clients[i].session_memory_bytes
                                           : cfg.session_memory_bytes),
                  (unsigned long long)(cfg.clients[i].max_graph_flops ? cfg.clients[i].max_graph_flops
                                                                      : cfg.max_graph_flops),
                  cfg.clients[i].max_peer_links);

    rc = baton_server_run(g_server);
    if (rc != 0) {
        baton_log(BATON_LOG_ERR, "server", NULL, 0, "server stopped: %s", baton_status_str(rc));
        goto out;
    }
    if (!cfg.quiet)
        baton_log(BATON_LOG_NOTICE, "server", NULL, 0, "stopped");
    code = 0;
out:
    {
        struct baton_server *s = g_server;
        signal(SIGTERM, SIG_IGN);
        signal(SIGINT, SIG_IGN);
        signal(SIGHUP, SIG_IGN);
        g_server = NULL; /* a late signal must not touch a freed server */
        baton_server_destroy(s);
    }
    baton_key_free(client_key);
    baton_key_free(peer_key);
    for (uint32_t i = 0; i < BATON_POLICY_MAX_CLIENTS; i++)
        baton_key_free(named_keys[i]);
    return code;
}
