/* batond's command line (batond_args.h): the usage text, the error line,
 * "--name=value" splitting and the option loop, apart from main so that
 * fuzz/fuzz_batond_args.c runs exactly the code batond runs. */
#include "cli/batond_args.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "baton/status.h"
#include "cli/cli.h"
#include "compute/compute.h"
#include "core/limits.h"
#include "server/log.h"
#include "server/policy.h"
#include "server/server.h"

/* The synopsis: all a usage error shows after its line (the whole text,
 * 60 lines, scrolled the error off a terminal). */
static const char synopsis[] =
    "usage: batond [--host ADDR] [--port N] [--port-file FILE] [--threads N]\n"
    "              [--key FILE [--peer-key FILE] [--encrypt]] [--insecure-no-auth]\n"
    "              [--client 'NAME KEYFILE [OPTION=VALUE]...']...\n"
    "              [--peer HOST:PORT]...\n"
    "              [--max-peer-links N] [--max-peer-links-per-session N]\n"
    "              [--policy FILE] [--SETTING VALUE]... [--print-policy]\n"
    "              [--no-seccomp] [--quiet] [--log-format text|json|journal]\n"
    "              [--help] [--version]\n";

static void usage(FILE *f)
{
    fputs(synopsis, f);
    fprintf(f,
            "  --host ADDR       address to listen on (default 127.0.0.1; another address\n"
            "                    needs --key or --client, or --insecure-no-auth)\n"
            "  --port N          TCP port (default %d; 0 picks a free port)\n"
            "  --port-file FILE  write the bound port to FILE (atomically) once listening\n"
            "                    (not a key or policy file: it would replace it)\n"
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
            "                    --session-memory-bytes 8G --fence-timeout 30s\n"
            "                    --peer-queue-depth 8 (every key: batond.policy(5),\n"
            "                    --print-policy)\n"
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
void batond_say(const char *kind, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    baton_vlog(BATON_LOG_ERR, kind, NULL, 0, fmt, ap);
    va_end(ap);
}

/* After a usage error: the synopsis as text (the error line stays in
 * sight; `batond --help` has the rest); in json and journal form a
 * multi-line text would break the one-record-a-line stream, so there the
 * error line's own "(see batond --help)" is all. */
static void usage_after_error(void)
{
    if (baton_log_get_format() == BATON_LOG_TEXT)
        fputs(synopsis, stderr);
}

/* An integer option's value (cli.h's rules), its error a usage line in the
 * chosen log format (batond_say). */
static int batond_parse_u64(const char *opt, const char *v, uint64_t min, uint64_t max,
                            uint64_t *out)
{
    const int why = baton_cli_check_u64(v, min, max, out);
    char buf[BATON_CLI_WHY_LEN];

    if (why == 0)
        return 0;
    batond_say("usage", "%s: '%s' %s", opt, v, baton_cli_u64_why(why, min, max, buf, sizeof buf));
    return -1;
}

/* The log format of the command line, before any other option is read, so
 * that their errors already take it: the last --log-format F (or
 * --log-format=F) with a valid F, else journal when stderr is the journal's
 * stream, else text. An invalid F is reported (as text) by the option loop. */
enum baton_log_format batond_log_format_from_args(int argc, char **argv)
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


/* The policy file named by --policy, if any (read before the other flags,
 * which override it). Returns 0, or after printing the error 1 (the file
 * cannot be read or is refused, as for a key file) or 2 (no value). */
int batond_load_policy_arg(int argc, char **argv, struct baton_policy *pol)
{
    char err[512];
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--policy") != 0)
            continue;
        if (i + 1 >= argc) {
            batond_say("usage", "--policy needs a value (see batond --help)");
            return 2;
        }
        if (argv[i + 1][0] == '\0') {
            batond_say("usage", "--policy: an empty path (see batond --help)");
            return 2;
        }
        if (!strncmp(argv[i + 1], "--", 2)) { /* as batond_parse_options says it */
            batond_say("usage", "--policy needs a value; the next argument is the option %s",
                       argv[i + 1]);
            return 2;
        }
        if (baton_policy_load(pol, argv[i + 1], err, sizeof err) != 0) {
            batond_say("startup", "policy: %s", err);
            return 1;
        }
        i++;
    }
    return 0;
}

/* When a (--xyz) begins one or more of batond's own options (not the
 * policy settings), as baton's commands would take it: that option when it
 * is the only one, else ""; NULL when it begins none. */
static const char *prefix_of_option(const char *a)
{
    static const char *const names[] = {
        "--host",   "--port",         "--port-file",  "--threads",    "--key",
        "--peer-key", "--encrypt",    "--client",     "--peer",       "--policy",
        "--print-policy", "--no-seccomp", "--quiet",  "--log-format", "--help",
        "--version", "--insecure-no-auth", "--max-peer-links", "--max-peer-links-per-session"};
    const char *found = NULL;
    size_t n = strlen(a);

    if (n < 3 || strncmp(a, "--", 2) != 0 || strchr(a, '=') != NULL)
        return NULL;
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (strncmp(names[i], a, n) == 0)
            found = found == NULL ? names[i] : "";
    return found;
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
                batond_say("usage", "%s (%s)%s", flag, key, err + 2 + n);
            else
                batond_say("usage", "%s%s", flag, err + 2 + n);
            return;
        }
    }
    batond_say("usage", "%s", err);
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
        batond_say("usage", "%s: an empty path (give the key file, made by baton keygen)", flag);
    else if (len >= BATON_POLICY_PATH_BYTES)
        batond_say("usage", "%s '%.40s...': the key file path is %zu bytes; at most %u", flag, path, len,
            BATON_POLICY_PATH_BYTES - 1);
    else
        batond_say("usage",
            "%s '%s': a key file path may not begin or end with a blank, begin with '#', "
            "have a '#' after a blank or hold control characters (it is kept in the policy, "
            "whose file could not hold it); rename the file or give another path to it",
            flag, path);
    return -1;
}


/* The argument vector with each "--name=value" given as "--name" "value"
 * (GNU style, as baton's commands take through getopt_long): the name is
 * cut at its '=' in place (argv's strings are the program's to modify), and
 * the new vector is kept for the life of the process. NULL when out of
 * memory, or (*out_argc = -1, after saying so) when a flag that takes no
 * value is given one (--quiet=1). */
static char **volatile kept_args; /* volatile: a store to a static never read
                                    * could be dropped, and the vector with it */

char **batond_split_eq_args(int argc, char **argv, int *out_argc)
{
    char **args;
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
                    batond_say("usage", "%s takes no value (see --help)", argv[i]);
                    *out_argc = -1;
                    free(args);
                    return NULL;
                }
            args[n++] = eq + 1;
        }
    }
    *out_argc = n;
    /* kept for the life of the process, so reachable from here: main's own
     * copy of the pointer may be gone from its frame by exit, and a leak
     * checker would then count the vector lost */
    kept_args = args;
    return args;
}


/* Whether option a takes a value (the next argument). */
static int takes_value(const char *a)
{
    static const char *const opts[] = {"--policy", "--log-format", "--host",  "--port",
                                       "--port-file", "--threads", "--key", "--peer-key"};

    /* flags that are also policy settings (encrypt = yes) take no value */
    static const char *const flags[] = {"--encrypt", "--insecure-no-auth"};

    for (size_t k = 0; k < sizeof opts / sizeof opts[0]; k++)
        if (!strcmp(a, opts[k]))
            return 1;
    for (size_t k = 0; k < sizeof flags / sizeof flags[0]; k++)
        if (!strcmp(a, flags[k]))
            return 0;
    return !strncmp(a, "--", 2) && baton_policy_key_known(a + 2);
}

int batond_parse_options(int argc, char **argv, struct batond_options *o)
{
    char err[512];
    int cli_peers = 0, cli_clients = 0;

    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;

        if (v && !strncmp(v, "--", 2) && takes_value(a)) {
            /* no value would start with "--" (a file named so is ./--x):
             * the value is missing, not the next option */
            batond_say("usage", "%s needs a value; the next argument is the option %s", a, v);
            usage_after_error();
            return 2;
        }
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(a, "--version")) {
            printf("batond %s (protocol %u)\n", BATON_VERSION, BATON_PROTOCOL_VERSION);
            return 0;
        } else if (!strcmp(a, "--quiet")) {
            o->cfg->quiet = 1;
        } else if (!strcmp(a, "--no-seccomp")) {
            o->use_seccomp = 0;
        } else if (!strcmp(a, "--print-policy")) {
            o->print_policy = 1;
        } else if (!strcmp(a, "--policy") && v) {
            i++; /* read by load_policy_arg */
        } else if (!strcmp(a, "--log-format") && v) {
            enum baton_log_format f; /* set by log_format_from_args */

            if (baton_log_format_parse(v, &f) != 0) {
                batond_say("usage", "--log-format: %s: expected text, json or journal", v);
                return 2;
            }
            i++;
        } else if (!strcmp(a, "--host") && v) {
            const int inner = baton_policy_host_bracketed(v);

            if (inner >= 0) { /* as in a URL: the resolver takes the address bare */
                if (inner > 0)
                    batond_say("usage", "--host: '%s': give the address without brackets "
                                        "(--host %.*s)", v, inner, v + 1);
                else
                    batond_say("usage", "--host: '%s': give the address without brackets", v);
                return 2;
            }
            if (baton_policy_set(o->pol, "bind", v, err, sizeof err) != 0) {
                batond_say("usage", "--host: '%s' is not an address (give a host name or an "
                                    "IPv4 or IPv6 address)", v);
                return 2;
            }
            i++;
        } else if (!strcmp(a, "--port") && v) {
            uint64_t p;

            if (batond_parse_u64("--port", v, 0, 65535, &p) != 0)
                return 2;
            o->pol->port = (uint16_t)p;
            i++;
        } else if (!strcmp(a, "--port-file") && v) {
            if (v[0] == '\0') { /* else found out only once the port is bound */
                batond_say("usage", "--port-file: an empty path (see batond --help)");
                return 2;
            }
            o->port_file = v;
            i++;
        } else if (!strcmp(a, "--threads") && v) {
            uint64_t t;

            if (batond_parse_u64("--threads", v, 1, BATON_POOL_MAX_THREADS, &t) != 0)
                return 2;
            o->pol->threads = (uint32_t)t;
            i++;
        } else if (!strcmp(a, "--key") && v) {
            o->key_path = v;
            i++;
        } else if (!strcmp(a, "--peer-key") && v) {
            o->peer_key_path = v;
            i++;
        } else if (!strcmp(a, "--encrypt")) {
            o->cfg->encrypt = 1;
        } else if (!strcmp(a, "--insecure-no-auth")) {
            o->cfg->insecure_no_auth = 1;
        } else if (!strcmp(a, "--key") || !strcmp(a, "--peer-key")) {
            batond_say("usage", "%s needs a value (see batond --help)", a);
            usage_after_error();
            return 2;
        } else if (!strncmp(a, "--", 2) && baton_policy_key_known(a + 2) && v) {
            /* a policy setting; a --peer (--client) list replaces the file's */
            if (!cli_peers && !strcmp(a + 2, "peer")) {
                o->pol->n_peers = 0;
                cli_peers = 1;
            }
            if (!cli_clients && !strcmp(a + 2, "client")) {
                o->pol->n_clients = 0;
                cli_clients = 1;
            }
            if (baton_policy_set(o->pol, a + 2, v, err, sizeof err) != 0) {
                print_flag_error(a, err);
                return 2;
            }
            i++;
        } else if (!strcmp(a, "--host") || !strcmp(a, "--port") || !strcmp(a, "--port-file") ||
                   !strcmp(a, "--threads") || !strcmp(a, "--policy") ||
                   !strcmp(a, "--log-format") ||
                   (!strncmp(a, "--", 2) && baton_policy_key_known(a + 2))) {
            batond_say("usage", "%s needs a value (see batond --help)", a);
            usage_after_error();
            return 2;
        } else {
            const char *full = prefix_of_option(a);

            if (full != NULL)
                batond_say("usage", "unknown argument: %s (batond takes its options spelled "
                                    "out in full%s%s%s; see batond --help)",
                           a, *full ? ": " : "", full, *full ? "?" : "");
            else
                batond_say("usage", "unknown argument: %s (see batond --help)", a);
            usage_after_error();
            return 2;
        }
    }

    /* --key, --peer-key and --encrypt are part of the policy in effect */
    if ((o->key_path && key_path_error("--key", "key_file", o->key_path, o->pol) != 0) ||
        (o->peer_key_path &&
         key_path_error("--peer-key", "peer_key_file", o->peer_key_path, o->pol) != 0))
        return 2;
    if (o->cfg->encrypt)
        o->pol->encrypt = 1;
    return BATOND_ARGS_RUN;
}
