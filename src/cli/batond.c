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
 * can start batond and wait for that file. SIGTERM/SIGINT drain the server
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

static void usage(FILE *f)
{
    fprintf(f,
            "usage: batond [--host ADDR] [--port N] [--port-file FILE] [--threads N]\n"
            "              [--key FILE [--peer-key FILE] [--encrypt]] [--insecure-no-auth]\n"
            "              [--peer HOST:PORT]... [--max-peer-links N]\n"
            "              [--policy FILE] [--SETTING VALUE]... [--print-policy]\n"
            "              [--no-seccomp] [--quiet] [--log-format text|json|journal]\n"
            "              [--help] [--version]\n"
            "  --host ADDR       address to listen on (default 127.0.0.1; another address\n"
            "                    needs --key or --client, or --insecure-no-auth)\n"
            "  --port N          TCP port (default %d; 0 picks a free port)\n"
            "  --port-file FILE  write the bound port to FILE (atomically) once listening\n"
            "  --threads N       compute threads per graph, 1..64 (default 1)\n"
            "  --key FILE        client key (baton keygen): every connection must\n"
            "                    authenticate; frames after AUTH carry a MAC. Without\n"
            "                    --key or key_file: $CREDENTIALS_DIRECTORY/client.key\n"
            "                    if there is one (systemd LoadCredential=)\n"
            "  --peer-key FILE   peer key: lets peer-role connections authenticate\n"
            "                    (needs --key or --client); likewise peer.key of the\n"
            "                    credentials\n"
            "  --encrypt         also encrypt payloads after AUTH (needs --key or --client)\n"
            "  --client 'NAME KEYFILE [OPTION=VALUE]...'  a named client key with limits\n"
            "                    of its own, as one quoted argument (repeatable; the\n"
            "                    command line's replace the policy file's; options\n"
            "                    max_connections, session_memory_bytes, max_graph_flops,\n"
            "                    max_peer_links: batond.policy(5) \"client\")\n"
            "  --peer HOST:PORT  a server this one may send hidden states to (direct\n"
            "                    path; repeatable; needs --peer-key). A name is resolved\n"
            "                    once, at start; a copy goes only to one of the addresses\n"
            "                    it gave, at that port. See also --peer-timeout,\n"
            "                    --peer-backoff-max\n"
            "  --max-peer-links N  peer links this server may have open to others, all\n"
            "                    sessions together, 0..1024 (default 16); past it a copy\n"
            "                    is \"not done\" and goes through the coordinator. 0: it\n"
            "                    opens none (every hand-off from it takes the hub path);\n"
            "                    links that other servers open to it are not counted\n"
            "  --max-peer-links-per-session N  the same for one session, 0..1024\n"
            "                    (default 4): one per destination it hands off to\n"
            "  --insecure-no-auth  allow a non-loopback --host without keys (anyone\n"
            "                    who reaches the port can use this server; logs a warning)\n"
            "  --policy FILE     read limits and settings from FILE (policy/batond.policy\n"
            "                    documents every key); flags override it\n"
            "  --SETTING VALUE   any policy key as a flag, '_' or '-' alike, e.g.\n"
            "                    --max-connections 16 --handshake-timeout 1s\n"
            "  --print-policy    print the resulting policy (key and --encrypt flags\n"
            "                    included) and exit, without reading the key files or\n"
            "                    checking that the key options fit together\n"
            "  --no-seccomp      do not install the seccomp allow-list (sanitizers,\n"
            "                    debugging)\n"
            "  --quiet           no per-connection or error log lines\n"
            "  --log-format F    log lines on stderr: text (\"batond: message\"), json\n"
            "                    (one object a line: ts, level, kind, msg, and the\n"
            "                    listening line's host, port, auth, ...) or\n"
            "                    journal (\"<priority>message\", no timestamp); default\n"
            "                    journal when stderr is the journal ($JOURNAL_STREAM),\n"
            "                    else text. It holds from the first line wherever it\n"
            "                    stands: option and setup errors too (the usage text\n"
            "                    follows a usage error only as text)\n"
            "\n"
            "A value may also follow its option after '=' (--port=7340).\n"
            "\n"
            "Exit status: 0 after SIGTERM or SIGINT (the server drains first), and for\n"
            "--help, --version, --print-policy; 1 runtime or file error (a key file or\n"
            "the policy file refused, the address does not resolve or cannot be bound);\n"
            "2 usage error (a bad flag or value, or options that need each other).\n",
            BATON_DEFAULT_PORT);
}

/* An error before the server runs, through the log (log.h), so that under
 * --log-format json (or journal) every line batond writes to stderr has
 * that form, usage errors included; as text it is "batond: MESSAGE", as
 * before. kind: "usage" (exit 2) or "startup" (exit 1). The format is
 * chosen before anything can fail (log_format_from_args). */
static void say(const char *kind, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void say(const char *kind, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    baton_vlog(BATON_LOG_ERR, kind, NULL, 0, fmt, ap);
    va_end(ap);
}

/* After a usage error: the usage text as text; in json and journal form a
 * multi-line text would break the one-record-a-line stream, so there the
 * error line's own "(see batond --help)" is all. */
static void usage_after_error(void)
{
    if (baton_log_get_format() == BATON_LOG_TEXT)
        usage(stderr);
}

/* The log format of the command line, before any other option is read, so
 * that their errors already take it: the last --log-format F (or
 * --log-format=F) with a valid F, else journal when stderr is the journal's
 * stream, else text. An invalid F is reported (as text) by the option loop. */
static enum baton_log_format log_format_from_args(int argc, char **argv)
{
    enum baton_log_format f = BATON_LOG_TEXT, one;
    int given = 0;

    for (int i = 1; i < argc; i++) {
        const char *v = NULL;

        if (!strcmp(argv[i], "--log-format") && i + 1 < argc)
            v = argv[++i];
        else if (!strncmp(argv[i], "--log-format=", 13))
            v = argv[i] + 13;
        if (v != NULL && baton_log_format_parse(v, &one) == 0) {
            f = one;
            given = 1;
        }
    }
    if (!given && baton_log_stderr_is_journal())
        f = BATON_LOG_JOURNAL;
    return f;
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

/* Usage rules of the key options, and the secure default: a non-loopback
 * address needs a key, or --insecure-no-auth. Returns 0 or exit code 2. */
static int check_auth_options(const char *key_path, const char *peer_key_path,
                              const struct baton_server_config *cfg, const char *host,
                              uint32_t n_peers, uint32_t n_clients)
{
    /* a named client key (policy `client` lines) serves as a client key */
    const char *any_client = key_path ? key_path : n_clients ? "client" : NULL;
    if (peer_key_path && !any_client) {
        say("usage", "--peer-key (peer_key_file) needs --key (key_file), the client key");
        return 2;
    }
    if (n_peers && !peer_key_path) {
        say("usage", "--peer (peer) needs --peer-key (peer_key_file): hidden states go only to "
                     "servers that prove the peer key");
        return 2;
    }
    if (cfg->encrypt && !any_client) {
        say("usage", "--encrypt (encrypt = yes) needs --key (key_file) or a client line");
        return 2;
    }
    if (cfg->insecure_no_auth && any_client) {
        say("usage", "--insecure-no-auth contradicts --key (and client lines)");
        return 2;
    }
    if (!any_client && !cfg->insecure_no_auth && !baton_net_host_is_loopback(host)) {
        say("usage",
            "refusing to listen on %s: it is not a loopback address and no key was given "
            "(anyone who reaches the port could use this server's memory); use --key FILE "
            "(baton keygen), or --insecure-no-auth on a trusted network",
            host);
        return 2;
    }
    return 0;
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

/* The policy file named by --policy, if any (read before the other flags,
 * which override it). Returns 0, or after printing the error 1 (the file
 * cannot be read or is refused, as for a key file) or 2 (no value). */
static int load_policy_arg(int argc, char **argv, struct baton_policy *pol)
{
    char err[512];
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--policy") != 0)
            continue;
        if (i + 1 >= argc) {
            say("usage", "--policy needs a value (see batond --help)");
            return 2;
        }
        if (baton_policy_load(pol, argv[i + 1], err, sizeof err) != 0) {
            say("startup", "policy: %s", err);
            return 1;
        }
        i++;
    }
    return 0;
}

/* Prints baton_policy_set's error for the flag `flag` as the user typed it
 * (--max-graph-flops), adding the policy key where it is spelled otherwise
 * (max_graph_flops): the error itself names the policy key. */
static void print_flag_error(const char *flag, const char *err)
{
    char key[64];
    size_t n = strlen(flag + 2), i;

    if (n < sizeof key && !strncmp(err, "--", 2)) {
        for (i = 0; i < n; i++)
            key[i] = flag[2 + i] == '-' ? '_' : flag[2 + i];
        key[n] = '\0';
        if (!strncmp(err + 2, key, n) && err[2 + n] == ':') {
            if (strcmp(flag + 2, key) != 0)
                say("usage", "%s (%s)%s", flag, key, err + 2 + n);
            else
                say("usage", "%s%s", flag, err + 2 + n);
            return;
        }
    }
    say("usage", "%s", err);
}

/* Sets policy key `key` (key_file, peer_key_file) to path, the value of
 * flag (--key, --peer-key). A path the policy cannot hold (one a policy
 * file line could not carry) is said in one message naming the flag and the
 * file, and why: "batond: --key ' k': a key file path may not begin or end
 * with a blank ...". Returns 0, or -1 after the message (a usage error). */
static int key_path_error(const char *flag, const char *key, const char *path,
                          struct baton_policy *pol)
{
    char err[512];
    const size_t len = strlen(path);

    if (baton_policy_set(pol, key, path, err, sizeof err) == 0)
        return 0;
    if (len == 0)
        say("usage", "%s: an empty path (give the key file, made by baton keygen)", flag);
    else if (len >= BATON_POLICY_PATH_BYTES)
        say("usage", "%s '%.40s...': the key file path is %zu bytes; at most %u", flag, path, len,
            BATON_POLICY_PATH_BYTES - 1);
    else
        say("usage",
            "%s '%s': a key file path may not begin or end with a blank, begin with '#', "
            "have a '#' after a blank or hold control characters (it is kept in the policy, "
            "whose file could not hold it); rename the file or give another path to it",
            flag, path);
    return -1;
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
        say("startup", "cannot listen on %s: the name does not resolve (%s)", host,
            rc != 0 ? gai_strerror(rc) : "no address");
        return 1;
    }
    freeaddrinfo(res);
    return 0;
}

/* The argument vector with each "--name=value" given as "--name" "value"
 * (GNU style, as baton's commands take through getopt_long): the name is
 * cut at its '=' in place (argv's strings are the program's to modify), and
 * the new vector is kept for the life of the process. NULL when out of
 * memory, or (*out_argc = -1, after saying so) when a flag that takes no
 * value is given one (--quiet=1). */
static char **split_eq_args(int argc, char **argv, int *out_argc)
{
    static char **args;
    int n = 0;

    args = calloc((size_t)argc * 2 + 1, sizeof(*args));
    if (args == NULL)
        return NULL;
    for (int i = 0; i < argc; i++) {
        char *eq = i > 0 && !strncmp(argv[i], "--", 2) ? strchr(argv[i], '=') : NULL;

        args[n++] = argv[i];
        if (eq != NULL && eq > argv[i] + 2) {
            static const char *const flags[] = {"--help",       "--version",    "--quiet",
                                                "--no-seccomp", "--print-policy", "--encrypt",
                                                "--insecure-no-auth"};

            *eq = '\0';
            for (size_t f = 0; f < sizeof flags / sizeof flags[0]; f++)
                if (!strcmp(argv[i], flags[f])) {
                    say("usage", "%s takes no value (see --help)", argv[i]);
                    *out_argc = -1;
                    return NULL;
                }
            args[n++] = eq + 1;
        }
    }
    *out_argc = n;
    return args;
}

int main(int argc, char **argv)
{
    static struct baton_policy pol;
    char err[512];
    int print_policy = 0, cli_peers = 0, cli_clients = 0;
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
    int rc, code = 1;
    baton_log_set_format(log_format_from_args(argc, argv));
    argv = split_eq_args(argc, argv, &argc);
    if (argv == NULL) {
        if (argc < 0)
            return 2; /* a flag given a value: said */
        say("startup", "out of memory");
        return 1;
    }
    baton_server_config_default(&cfg);
    baton_policy_default(&pol);
    rc = load_policy_arg(argc, argv, &pol);
    if (rc != 0)
        return rc;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(a, "--version")) {
            printf("batond %s (protocol %u)\n", BATON_VERSION, BATON_PROTOCOL_VERSION);
            return 0;
        } else if (!strcmp(a, "--quiet")) {
            cfg.quiet = 1;
        } else if (!strcmp(a, "--no-seccomp")) {
            use_seccomp = 0;
        } else if (!strcmp(a, "--print-policy")) {
            print_policy = 1;
        } else if (!strcmp(a, "--policy") && v) {
            i++; /* read by load_policy_arg */
        } else if (!strcmp(a, "--log-format") && v) {
            enum baton_log_format f; /* set by log_format_from_args */

            if (baton_log_format_parse(v, &f) != 0) {
                say("usage", "--log-format: %s: expected text, json or journal", v);
                return 2;
            }
            i++;
        } else if (!strcmp(a, "--host") && v) {
            if (baton_policy_set(&pol, "bind", v, err, sizeof err) != 0) {
                say("usage", "--host: not an address: %s", v);
                return 2;
            }
            i++;
        } else if (!strcmp(a, "--port") && v) {
            uint32_t p;

            if (baton_cli_parse_u32("batond", "--port", v, 0, 65535, &p) != 0)
                return 2;
            pol.port = (uint16_t)p;
            i++;
        } else if (!strcmp(a, "--port-file") && v) {
            port_file = v;
            i++;
        } else if (!strcmp(a, "--threads") && v) {
            if (baton_cli_parse_u32("batond", "--threads", v, 1, BATON_POOL_MAX_THREADS,
                                    &pol.threads) != 0)
                return 2;
            i++;
        } else if (!strcmp(a, "--key") && v) {
            key_path = v;
            i++;
        } else if (!strcmp(a, "--peer-key") && v) {
            peer_key_path = v;
            i++;
        } else if (!strcmp(a, "--encrypt")) {
            cfg.encrypt = 1;
        } else if (!strcmp(a, "--insecure-no-auth")) {
            cfg.insecure_no_auth = 1;
        } else if (!strcmp(a, "--key") || !strcmp(a, "--peer-key")) {
            say("usage", "%s needs a value (see batond --help)", a);
            usage_after_error();
            return 2;
        } else if (!strncmp(a, "--", 2) && baton_policy_key_known(a + 2) && v &&
                   !strncmp(v, "--", 2)) {
            /* no value would start with "--": the value is missing */
            say("usage", "%s needs a value; the next argument is the option %s", a, v);
            usage_after_error();
            return 2;
        } else if (!strncmp(a, "--", 2) && baton_policy_key_known(a + 2) && v) {
            /* a policy setting; a --peer (--client) list replaces the file's */
            if (!cli_peers && !strcmp(a + 2, "peer")) {
                pol.n_peers = 0;
                cli_peers = 1;
            }
            if (!cli_clients && !strcmp(a + 2, "client")) {
                pol.n_clients = 0;
                cli_clients = 1;
            }
            if (baton_policy_set(&pol, a + 2, v, err, sizeof err) != 0) {
                print_flag_error(a, err);
                return 2;
            }
            i++;
        } else if (!strcmp(a, "--host") || !strcmp(a, "--port") || !strcmp(a, "--port-file") ||
                   !strcmp(a, "--threads") || !strcmp(a, "--policy") ||
                   !strcmp(a, "--log-format") ||
                   (!strncmp(a, "--", 2) && baton_policy_key_known(a + 2))) {
            say("usage", "%s needs a value (see batond --help)", a);
            usage_after_error();
            return 2;
        } else {
            say("usage", "unknown argument: %s (see batond --help)", a);
            usage_after_error();
            return 2;
        }
    }


    /* --key, --peer-key and --encrypt are part of the policy in effect */
    if ((key_path && key_path_error("--key", "key_file", key_path, &pol) != 0) ||
        (peer_key_path && key_path_error("--peer-key", "peer_key_file", peer_key_path, &pol) != 0))
        return 2;
    if (cfg.encrypt)
        pol.encrypt = 1;
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
    {
        /* the policy gives every limit; quiet and insecure_no_auth are flags
         * only, and --encrypt adds to `encrypt` */
        struct baton_server_config flags = cfg;
        if (baton_policy_apply(&pol, &cfg, err, sizeof err) != 0) {
            say("startup", "policy: %s", err);
            return 1;
        }
        cfg.quiet = flags.quiet;
        cfg.insecure_no_auth = flags.insecure_no_auth;
        cfg.encrypt = cfg.encrypt || flags.encrypt;
    }
    host = pol.bind;
    port = pol.port;
    if (!key_path && pol.key_file[0])
        key_path = pol.key_file;
    if (!peer_key_path && pol.peer_key_file[0])
        peer_key_path = pol.peer_key_file;
    /* no key configured: the service manager's credentials, if any */
    if (!key_path && credential_path("client.key", cred_key, sizeof cred_key)) {
        key_path = cred_key;
        key_is_credential = 1;
    }
    if (!peer_key_path && credential_path("peer.key", cred_peer_key, sizeof cred_peer_key)) {
        peer_key_path = cred_peer_key;
        peer_key_is_credential = 1;
    }

    /* process hardening that needs nothing else */
    struct rlimit no_core = {0, 0};
    setrlimit(RLIMIT_CORE, &no_core);
    signal(SIGPIPE, SIG_IGN);

    /* keys: checked and loaded before anything listens */
    if (check_host_resolves(host) != 0)
        return 1;
    rc = check_auth_options(key_path, peer_key_path, &cfg, host, pol.n_peers, pol.n_clients);
    if (rc != 0)
        return rc;
    if (key_path && load_key(key_is_credential ? "credential client.key" : "--key", key_path,
                             key_is_credential, &client_key) != 0)
        goto out;
    if (peer_key_path &&
        load_key(peer_key_is_credential ? "credential peer.key" : "--peer-key", peer_key_path,
                 peer_key_is_credential, &peer_key) != 0)
        goto out;
    /* one key for both roles would let every client open a peer-role link
     * and write into another session's granted range (SECURITY.md) */
    if (client_key && peer_key &&
        sodium_memcmp(baton_key_bytes(client_key), baton_key_bytes(peer_key), BATON_KEY_BYTES) ==
            0) {
        say("usage", "--peer-key: %s holds the same key as --key %s; the peer key must be its own "
                     "(baton keygen)",
            peer_key_path, key_path);
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
        cfg.clients[i].key = named_keys[i];
        const uint8_t *kb = baton_key_bytes(named_keys[i]);
        const char *same = NULL;
        for (uint32_t j = 0; j < i && !same; j++)
            if (sodium_memcmp(kb, baton_key_bytes(named_keys[j]), BATON_KEY_BYTES) == 0)
                same = pol.clients[j].key_file;
        const char *what = "client line";
        if (!same && client_key &&
            sodium_memcmp(kb, baton_key_bytes(client_key), BATON_KEY_BYTES) == 0) {
            same = key_path;
            what = "--key (key_file)";
        }
        if (!same && peer_key && sodium_memcmp(kb, baton_key_bytes(peer_key), BATON_KEY_BYTES) == 0) {
            same = peer_key_path;
            what = "--peer-key (peer_key_file)";
        }
        if (same) {
            say("usage", "client %s: %s holds the same key as the %s %s; every client key must "
                         "be its own (baton keygen)",
                pol.clients[i].name, pol.clients[i].key_file, what, same);
            code = 2;
            goto out;
        }
    }
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
        };
        baton_log(BATON_LOG_NOTICE, "startup", f, sizeof f / sizeof f[0],
                  "listening on %s%s%s:%u (protocol %u, %u compute thread%s, %llu MiB)",
                  strchr(host, ':') ? "[" : "", host, strchr(host, ':') ? "]" : "",
                  (unsigned)bound, BATON_PROTOCOL_VERSION, cfg.n_threads,
                  cfg.n_threads == 1 ? "" : "s", (unsigned long long)(cfg.total_memory_bytes >> 20));
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
        g_server = NULL; /* a late signal must not touch a freed server */
        baton_server_destroy(s);
    }
    baton_key_free(client_key);
    baton_key_free(peer_key);
    for (uint32_t i = 0; i < BATON_POLICY_MAX_CLIENTS; i++)
        baton_key_free(named_keys[i]);
    return code;
}
