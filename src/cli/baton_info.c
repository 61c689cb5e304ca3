/* `baton info --servers host:port,...|local [--timeout MS] [--key FILE]`:
 * connects to each server, performs HELLO (and AUTH with a key: --key or
 * BATON_KEY_FILE) and prints its DEVICE_INFO. `local` asks an in-process
 * server (the one `baton run --servers local` would use). Exit 0 when every
 * server answered, 1 when any failed (or the key file is refused), 2 on a
 * usage error. */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "auth/auth.h"
#include "baton/client.h"
#include "cli/cli.h"
#include "core/ops.h"
#include "core/types.h"
#include "model/run.h"
#include "net/net.h"
#include "server/server.h"

static void info_usage(FILE *f)
{
    fputs("usage: baton info --servers HOST:PORT[,HOST:PORT...]|local [--timeout MS]\n"
          "                  [--key FILE]\n"
          "  prints each server's device info (memory, limits, types, ops)\n"
          "  --servers LIST the servers (default: $BATON_SERVERS)\n"
          "  --timeout MS   connect and reply deadline per server (default 5000)\n"
          "  --key FILE     client key for servers started with batond --key\n"
          "                 (default: $BATON_KEY_FILE)\n"
          "  -h, --help     this text\n"
          "Exit status: 0 every server answered, 1 a server could not be reached or\n"
          "refused the handshake, or the key file was refused, 2 usage error.\n",
          f);
}

static void print_info(const char *name, const struct baton_device_info *d)
{
    printf("%s\n", name);
    printf("  name        %s\n", d->name);
    printf("  protocol    %u\n", d->version);
    printf("  memory      %llu bytes total (%llu MiB), %llu bytes free (%llu MiB)\n",
           (unsigned long long)d->total_memory, (unsigned long long)(d->total_memory >> 20),
           (unsigned long long)d->free_memory, (unsigned long long)(d->free_memory >> 20));
    printf("  max buffer  %llu bytes\n", (unsigned long long)d->max_buffer_bytes);
    printf("  alignment   %llu\n", (unsigned long long)d->alignment);
    printf("  threads     %u\n", d->n_threads);
    printf("  types      ");
    for (uint32_t t = 0; t < 64; t++)
        if (d->type_mask & (1ull << t))
            printf(" %s", baton_type_get(t) ? baton_type_name(t) : "?");
    printf("\n  ops        ");
    for (uint32_t o = 0; o < 64; o++)
        if (d->op_mask & (1ull << o))
            printf(" %s", baton_op_name(o));
    printf("\n");
}

/* Connects to an in-process server over a socketpair. *srv must be
 * destroyed after the connection is closed. */
static int connect_local(const struct baton_conn_options *o, struct baton_server **srv,
                         struct baton_conn **c)
{
    struct baton_server_config cfg;
    int sv[2], rc;
    baton_server_config_default(&cfg);
    cfg.quiet = 1;
    cfg.client_key = o->key;
    rc = baton_server_create(&cfg, srv);
    if (rc != 0)
        return rc;
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0)
        return BATON_E_IO;
    rc = baton_server_serve_fd(*srv, sv[0]);
    if (rc != 0) {
        close(sv[1]);
        return rc;
    }
    return baton_conn_adopt_fd_ex(sv[1], o, c);
}

static int info_one(const char *spec, const struct baton_conn_options *o, int key_from)
{
    char host[256];
    uint16_t port;
    struct baton_conn *c = NULL;
    struct baton_server *srv = NULL;
    struct baton_device_info d;
    int rc;
    if (!strcmp(spec, "local")) {
        rc = connect_local(o, &srv, &c);
    } else if (baton_net_split_hostport(spec, host, sizeof host, &port) != 0) {
        fprintf(stderr, "baton info: %s: expected HOST:PORT\n", spec);
        return 2;
    } else {
        /* connect, then the handshake: a failure to connect gets its own hint */
        int fd = -1;

        rc = baton_net_connect(host, port, o->timeout_ms, &fd);
        if (rc != 0) {
            const int os_err = rc == BATON_E_IO ? errno : 0;

            /* worded as baton run words it (run_output.c, connect_fail);
             * the system's reason where baton_net_connect left one in errno */
            if (rc == BATON_E_INVAL)
                fprintf(stderr, "baton info: %s: connect failed: the host name does not "
                                "resolve\n", spec);
            else
                fprintf(stderr, "baton info: %s: connect failed: %s (%s)%s\n", spec,
                        baton_status_name(rc), os_err ? strerror(os_err) : baton_status_str(rc),
                        baton_run_connect_hint(rc, 1, os_err, key_from, -1));
            return 1;
        }
        int server_auth = -1;
        struct baton_conn_options oa = *o;

        oa.server_auth = &server_auth;
        rc = baton_conn_adopt_fd_ex(fd, &oa, &c);
        if (rc != 0) { /* the handshake */
            fprintf(stderr, "baton info: %s: connect failed: %s (%s)%s\n", spec,
                    baton_status_name(rc), baton_status_str(rc),
                    baton_run_connect_hint(rc, 0, 0, key_from, server_auth));
            if (rc == BATON_E_TIMEOUT)
                fprintf(stderr, "baton info: %s timed out: it took the TCP connection but sent "
                                "no batond HELLO reply within --timeout %d ms: is it a batond "
                                "port? (a busy batond gets more time from a larger --timeout)\n",
                        spec, o->timeout_ms);
            return 1;
        }
    }
    if (rc == 0)
        rc = baton_device_info(c, &d);
    if (rc == 0) {
        print_info(spec, &d);
        printf("  auth        %s\n", !baton_conn_authenticated(c) ? "none"
                                     : baton_conn_encrypted(c)    ? "key, frames MAC'd and encrypted"
                                                                  : "key, frames MAC'd");
        uint64_t f = baton_conn_server_hello(c)->features;
        printf("  direct path %s\n", (f & BATON_FEATURE_PEER_COPY)
                                          ? "yes (holds a peer key: COPY_TENSOR_TO, PEER_WRITE)"
                                          : strcmp(spec, "local") == 0
                                              ? "no (in-process)"
                                              : "no (started without --peer-key)");
        printf("  pipeline    %s\n",
               !(f & BATON_FEATURE_PIPELINE)    ? "no (an older batond: baton run refuses it)"
               : !(f & BATON_FEATURE_OWNER_FENCE) ? "yes, without the owner's PEER_FENCE (an "
                                                    "older batond: baton run takes the hub path "
                                                    "into it)"
                                                  : "yes (GRAPH_REGISTER / GRAPH_RUN, fences)");
    }
    else if (c == NULL) /* the in-process server's connection */
        fprintf(stderr, "baton info: %s: connect failed: %s (%s)%s\n", spec,
                baton_status_name(rc), baton_status_str(rc),
                baton_run_connect_hint(rc, 0, 0, key_from, -1));
    else
        fprintf(stderr, "baton info: %s: DEVICE_INFO failed: %s (%s)%s\n", spec,
                baton_status_name(rc), baton_status_str(rc),
                rc == BATON_E_TIMEOUT ? "; no reply within --timeout: a batond too busy to "
                                        "answer? (a larger --timeout gives it more time)"
                : rc == BATON_E_IO    ? "; the server closed the connection"
                                      : "");
    baton_conn_close(c);
    baton_server_destroy(srv);
    return rc == 0 ? 0 : 1;
}

int baton_cmd_info(int argc, char **argv)
{
    const char *servers = getenv("BATON_SERVERS"), *key_path = getenv("BATON_KEY_FILE");
    const char *key_name = "BATON_KEY_FILE"; /* where key_path came from */
    const char *servers_name = "BATON_SERVERS"; /* ... and servers: named in its errors */
    struct baton_key *key = NULL;
    int timeout_ms = 5000, c;
    enum { O_SERVERS = 256, O_KEY, O_TIMEOUT };
    static const struct option opts[] = {{"servers", required_argument, 0, O_SERVERS},
                                         {"key", required_argument, 0, O_KEY},
                                         {"timeout", required_argument, 0, O_TIMEOUT},
                                         {"help", no_argument, 0, 'h'},
                                         {0, 0, 0, 0}};

    optind = 1;
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        uint32_t t;

        switch (c) {
        case 'h': info_usage(stdout); return 0;
        case O_SERVERS:
            servers = optarg;
            servers_name = "--servers";
            break;
        case O_KEY:
            key_path = optarg;
            key_name = "--key";
            break;
        case O_TIMEOUT:
            if (baton_cli_parse_u32("baton info", "--timeout", optarg, 1, 86400000, &t) != 0)
                return 2;
            timeout_ms = (int)t;
            break;
        default: /* getopt said which option */
            fputs("(see `baton info --help`)\n", stderr);
            return 2;
        }
    }
    if (optind < argc) {
        fprintf(stderr,
                "baton info: %s: unknown argument (the servers go after --servers)\n"
                "(see `baton info --help`)\n",
                argv[optind]);
        return 2;
    }
    /* an empty --key is a usage error, not "no key" (an empty
     * BATON_KEY_FILE still means none) */
    if (strcmp(key_name, "--key") == 0 && baton_cli_empty_output("baton info", "--key", key_path))
        return 2;
    if (!servers || !*servers) {
        fputs("baton info: --servers (or BATON_SERVERS) is required\n"
              "(see `baton info --help`)\n",
              stderr);
        return 2;
    }
    {
        /* the list's syntax, as `baton run` checks it: empty entries, a bad
         * host or port, more than 64 servers are usage errors */
        struct baton_run_config rc_cfg;

        baton_run_config_default(&rc_cfg);
        rc_cfg.prog = "baton info";
        rc_cfg.servers = servers;
        rc_cfg.log = stderr;
        if (baton_run_check_stages(&rc_cfg, servers_name) != 0)
            return 2;
    }
    if (key_path && *key_path) {
        char err[256];
        int rc = baton_auth_init();
        if (rc == 0)
            rc = baton_key_open(key_path, &key, err, sizeof err);
        else
            snprintf(err, sizeof err, "no usable random source (libsodium)");
        if (rc != 0) {
            fprintf(stderr, "baton info: %s: %s\n", key_name, err);
            return 1;
        }
    }
    struct baton_conn_options o = {.timeout_ms = timeout_ms, .key = key};
    char *list = strdup(servers), *save = NULL;
    int code = 0;
    if (!list) {
        fprintf(stderr, "baton info: out of memory\n");
        baton_key_free(key);
        return 1;
    }
    for (char *tok = strtok_r(list, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        char *at = strchr(tok, '@'); /* host:port@peerhost:peerport: ask host:port */
        int r;

        if (at)
            *at = '\0';
        r = info_one(tok, &o, key == NULL ? 0 : strcmp(key_name, "--key") == 0 ? 1 : 2);
        if (r > code)
            code = r;
    }
    free(list);
    baton_key_free(key);
    return code;
}
