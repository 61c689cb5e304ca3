/* batond: the baton tensor server (DESIGN.md, docs/PROTOCOL.md).
 *
 *   batond [--host 127.0.0.1] [--port 7340] [--port-file F] [--threads N]
 *          [--quiet] [--help] [--version]
 *
 * Listens on loopback only until authentication exists. --port 0 picks a
 * free port; the port actually bound is written (atomically: temp file in
 * the same directory, then rename) to --port-file once listening, so a test
 * can start batond and wait for that file. SIGTERM/SIGINT drain the server
 * (no new connections, requests in flight finish) and exit 0. Exit 1 on a
 * runtime failure, 2 on a usage error.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "baton/status.h"
#include "core/limits.h"
#include "net/net.h"
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
            "              [--quiet] [--help] [--version]\n"
            "  --host ADDR       address to listen on (default 127.0.0.1; loopback only\n"
            "                    until authentication exists)\n"
            "  --port N          TCP port (default %d; 0 picks a free port)\n"
            "  --port-file FILE  write the bound port to FILE (atomically) once listening\n"
            "  --threads N       compute threads per graph (default 1)\n"
            "  --quiet           no per-connection or error log lines\n",
            BATON_DEFAULT_PORT);
}

static int parse_u32(const char *s, uint32_t lo, uint32_t hi, uint32_t *out)
{
    char *end;
    errno = 0;
    if (!s || !*s || *s == '-' || *s == '+')
        return -1;
    unsigned long v = strtoul(s, &end, 10);
    if (errno || *end || v < lo || v > hi)
        return -1;
    *out = (uint32_t)v;
    return 0;
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
    ok = (close(fd) == 0) && ok;
    if (!ok || rename(tmp, path) != 0) {
        unlink(tmp);
        return -1;
    }
    return 0;
}

int main(int argc, char **argv)
{
    const char *host = "127.0.0.1", *port_file = NULL;
    uint16_t port = BATON_DEFAULT_PORT, bound = 0;
    struct baton_server_config cfg;
    int rc, code = 1;

    baton_server_config_default(&cfg);
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
        } else if (!strcmp(a, "--host") && v) {
            host = v;
            i++;
        } else if (!strcmp(a, "--port") && v) {
            if (baton_net_parse_port(v, &port) != 0) {
                fprintf(stderr, "batond: --port: not a port number: %s\n", v);
                return 2;
            }
            i++;
        } else if (!strcmp(a, "--port-file") && v) {
            port_file = v;
            i++;
        } else if (!strcmp(a, "--threads") && v) {
            if (parse_u32(v, 1, 64, &cfg.n_threads) != 0) {
                fprintf(stderr, "batond: --threads: expected 1..64, got %s\n", v);
                return 2;
            }
            i++;
        } else if (!strcmp(a, "--host") || !strcmp(a, "--port") || !strcmp(a, "--port-file") ||
                   !strcmp(a, "--threads")) {
            fprintf(stderr, "batond: %s needs a value\n", a);
            usage(stderr);
            return 2;
        } else {
            fprintf(stderr, "batond: unknown argument: %s\n", a);
            usage(stderr);
            return 2;
        }
    }

    /* process hardening that needs nothing else */
    struct rlimit no_core = {0, 0};
    setrlimit(RLIMIT_CORE, &no_core);
    signal(SIGPIPE, SIG_IGN);

    if (!baton_net_host_is_loopback(host)) {
        fprintf(stderr,
                "batond: refusing to listen on %s: it is not a loopback address, and this "
                "build has no authentication yet (anyone who reaches the port could use "
                "this server's memory)\n",
                host);
        return 2;
    }

    rc = baton_server_create(&cfg, &g_server);
    if (rc != 0) {
        fprintf(stderr, "batond: cannot create server: %s\n", baton_status_str(rc));
        return 1;
    }
    rc = baton_server_listen(g_server, host, port, &bound);
    if (rc != 0) {
        fprintf(stderr, "batond: cannot listen on %s:%u: %s%s%s\n", host, (unsigned)port,
                baton_status_str(rc), rc == BATON_E_IO ? ": " : "",
                rc == BATON_E_IO ? strerror(errno) : "");
        goto out;
    }

    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);

    if (port_file && write_port_file(port_file, bound) != 0) {
        fprintf(stderr, "batond: cannot write port file %s: %s\n", port_file, strerror(errno));
        goto out;
    }
    fprintf(stderr, "batond: listening on %s%s%s:%u (protocol %u, %u compute thread%s, %llu MiB)\n",
            strchr(host, ':') ? "[" : "", host, strchr(host, ':') ? "]" : "", (unsigned)bound,
            BATON_PROTOCOL_VERSION, cfg.n_threads, cfg.n_threads == 1 ? "" : "s",
            (unsigned long long)(cfg.total_memory_bytes >> 20));

    rc = baton_server_run(g_server);
    if (rc != 0) {
        fprintf(stderr, "batond: server stopped: %s\n", baton_status_str(rc));
        goto out;
    }
    if (!cfg.quiet)
        fprintf(stderr, "batond: stopped\n");
    code = 0;
out:
    {
        struct baton_server *s = g_server;
        signal(SIGTERM, SIG_IGN);
        signal(SIGINT, SIG_IGN);
        g_server = NULL; /* a late signal must not touch a freed server */
        baton_server_destroy(s);
    }
    return code;
}
