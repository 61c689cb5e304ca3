/* Raw loopback TCP reference for bench/transport.sh: what the kernel's
 * loopback gives with no protocol at all, to set batond's SET_TENSOR /
 * GET_TENSOR and round-trip figures against.
 *
 *   rawtcp serve [--port-file FILE]           listen on 127.0.0.1, port 0
 *   rawtcp run PORT [--mib-list 1,64] [--call-kib-list 0,64,256,1024,4096]
 *              [--rtt-iters N] [--handoff-kib K] [--phase stream|rtt|all] [--quit]
 *
 * The server serves one connection at a time, strictly in order; each
 * request is a 13-byte header: 1 byte kind, 8 bytes length, 4 bytes call
 * size in bytes (little endian; 0: the whole length in one call).
 *   'S' (send): the client then streams `length` bytes, which the server
 *       reads into one buffer of that size, then answers 1 byte. The client
 *       times submit to answer: the shape of a SET_TENSOR.
 *   's': as 'S', but the server reads as batond does: recv(MSG_DONTWAIT)
 *       of whatever has arrived, poll(POLLIN) when nothing has.
 *   'G' (get): the server answers with `length` bytes from one buffer; the
 *       client times the request to its last byte: the shape of GET_TENSOR.
 *   'E' (echo): `length` times, the client sends 1 byte and waits for the
 *       server's 1-byte echo; the client times the whole loop.
 *   'Q': the server closes the connection and exits.
 * TCP_NODELAY on both ends. A transfer of call size C is a loop of blocking
 * send() calls of C bytes on one end and recv(MSG_WAITALL) calls of C bytes
 * on the other (C = 0: one call each over the whole buffer, which the kernel
 * splits; MSG_WAITALL saves a wake-up per segment). Which C is best depends
 * on the host (one call of 64 MiB was best on the AMD EPYC VM; 256 KiB calls
 * on an Intel Xeon host, 2.4x the one-call rate), so the stream figures are
 * measured for every size of --call-kib-list, and once more with the poll
 * reader of batond and libbaton (one write call; the reader takes what has
 * arrived, recv(MSG_DONTWAIT) + poll: on the AMD EPYC VM it read 64 MiB
 * about twice as fast as recv(MSG_WAITALL)), and the best is the baseline. The server's buffer is mmap'd and
 * madvise(MADV_HUGEPAGE)d like batond's buffers; the client's is malloc'd
 * like bench/transport.c's.
 *
 * `run` prints one `key=value` line per figure, figures only, never a test:
 *   raw_send_MIB_MBs=X raw_get_MIB_MBs=Y   (MB = 1e6 bytes of payload; the
 *                        best over the call sizes, each also printed as
 *                        raw_send_MIB_callKKiB_MBs and raw_get_...; K = 0:
 *                        one call; the poll reader's as raw_send_MIB_poll_MBs
 *                        and raw_get_MIB_poll_MBs; raw_send_MIB_best_call_kib=K
 *                        or raw_send_MIB_best_reader=poll names the best)
 *   raw_rtt_us=Z                           (mean over N round trips)
 *   raw_handoff_us=W    (mean of N/10 rounds of: get K KiB, then send them
 *                        back and wait for the answer: the raw shape of a
 *                        boundary hand-off through the coordinator)
 * The stream phase gives the first two, the rtt phase the last two; --quit
 * stops the server afterwards.
 * Own code; plain POSIX sockets.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "../tests/integration/sock_io.h"

#define MAX_BYTES (1ull << 30)
#define MAX_SIZES 8
#define MAX_CALLS 8
#define HDR_BYTES 13

static double now(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int read_all(int fd, void *buf, size_t n)
{
    uint8_t *p = buf;

    while (n > 0) {
        ssize_t r = recv(fd, p, n, MSG_WAITALL);

        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return -1;
        p += r;
        n -= (size_t)r;
    }
    return 0;
}

/* n bytes in calls of at most call bytes each (0: one call). */
static int read_calls(int fd, void *buf, size_t n, size_t call)
{
    uint8_t *p = buf;

    while (n > 0) {
        const size_t c = call && call < n ? call : n;

        if (read_all(fd, p, c) != 0)
            return -1;
        p += c;
        n -= c;
    }
    return 0;
}

/* n bytes the way batond's transport reads (src/net/transport_socket.c):
 * recv(MSG_DONTWAIT) of whatever is there, poll(POLLIN) when nothing is. */
static int read_poll(int fd, void *buf, size_t n)
{
    uint8_t *p = buf;

    while (n > 0) {
        ssize_t r = recv(fd, p, n, MSG_DONTWAIT);

        if (r > 0) {
            p += r;
            n -= (size_t)r;
            continue;
        }
        if (r == 0)
            return -1;
        if (errno == EINTR)
            continue;
        if (errno != EAGAIN && errno != EWOULDBLOCK)
            return -1;
        struct pollfd pf = {.fd = fd, .events = POLLIN};
        if (poll(&pf, 1, -1) < 0 && errno != EINTR)
            return -1;
    }
    return 0;
}

/* n bytes the way batond writes (src/net/transport_socket.c): send of
 * everything left with MSG_DONTWAIT, poll(POLLOUT) when the socket is full. */
static int write_poll(int fd, const void *buf, size_t n)
{
    const uint8_t *p = buf;

    while (n > 0) {
        ssize_t w = send(fd, p, n, MSG_DONTWAIT | MSG_NOSIGNAL);

        if (w > 0) {
            p += w;
            n -= (size_t)w;
            continue;
        }
        if (w < 0 && errno == EINTR)
            continue;
        if (w == 0 || (errno != EAGAIN && errno != EWOULDBLOCK))
            return -1;
        struct pollfd pf = {.fd = fd, .events = POLLOUT};
        if (poll(&pf, 1, -1) < 0 && errno != EINTR)
            return -1;
    }
    return 0;
}

static int write_calls(int fd, const void *buf, size_t n, size_t call)
{
    const uint8_t *p = buf;

    while (n > 0) {
        const size_t c = call && call < n ? call : n;

        if (write_all(fd, p, c) != 0)
            return -1;
        p += c;
        n -= c;
    }
    return 0;
}

/* A buffer of n bytes, madvise(MADV_HUGEPAGE)d when large, as batond's
 * buffers are (src/server/handles.c), and touched; NULL on failure. */
static uint8_t *big_buffer(size_t n, uint8_t fillv)
{
    void *m = mmap(NULL, n ? n : 1, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

    if (m == MAP_FAILED)
        return NULL;
    if (n >= (2u << 20))
        (void)madvise(m, n, MADV_HUGEPAGE);
    memset(m, fillv, n);
    return m;
}

static void set_nodelay(int fd)
{
    int one = 1;

    (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

static void put_u64(uint8_t *p, uint64_t v)
{
    int i;

    for (i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static uint32_t get_u32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint64_t get_u64(const uint8_t *p)
{
    uint64_t v = 0;
    int i;

    for (i = 7; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}

/* Serves one connection until it closes; 1 after a 'Q' request. */
static int serve_conn(int fd, uint8_t **buf, size_t *cap)
{
    uint8_t hdr[HDR_BYTES], b = 0;

    for (;;) {
        uint64_t len, i;
        size_t call;

        if (read_all(fd, hdr, sizeof(hdr)) != 0)
            return 0;
        len = get_u64(hdr + 1);
        call = get_u32(hdr + 9);
        if (hdr[0] == 'Q')
            return 1;
        if (len > MAX_BYTES)
            return 0;
        if ((hdr[0] == 'S' || hdr[0] == 's' || hdr[0] == 'G' || hdr[0] == 'g') && len > *cap) {
            uint8_t *nb = big_buffer((size_t)len, 0x5a);

            if (!nb)
                return 0;
            if (*buf)
                munmap(*buf, *cap);
            *buf = nb;
            *cap = (size_t)len;
        }
        switch (hdr[0]) {
        case 'S':
            if (read_calls(fd, *buf, (size_t)len, call) != 0 || write_all(fd, &b, 1) != 0)
                return 0;
            break;
        case 's':
            if (read_poll(fd, *buf, (size_t)len) != 0 || write_all(fd, &b, 1) != 0)
                return 0;
            break;
        case 'g':
            if (write_poll(fd, *buf, (size_t)len) != 0)
                return 0;
            break;
        case 'G':
            if (write_calls(fd, *buf, (size_t)len, call) != 0)
                return 0;
            break;
        case 'E':
            for (i = 0; i < len; i++)
                if (read_all(fd, &b, 1) != 0 || write_all(fd, &b, 1) != 0)
                    return 0;
            break;
        default:
            return 0;
        }
    }
}

static int cmd_serve(const char *port_file)
{
    struct sockaddr_in a;
    socklen_t alen = sizeof(a);
    uint8_t *buf = NULL;
    size_t cap = 0;
    int ls, one = 1, done = 0;

    ls = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (ls < 0)
        return 1;
    (void)setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    memset(&a, 0, sizeof(a));
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = 0;
    if (bind(ls, (struct sockaddr *)&a, sizeof(a)) != 0 || listen(ls, 4) != 0 ||
        getsockname(ls, (struct sockaddr *)&a, &alen) != 0) {
        perror("rawtcp serve");
        close(ls);
        return 1;
    }
    if (port_file) {
        char tmp[4096];
        FILE *f;

        snprintf(tmp, sizeof(tmp), "%s.tmp", port_file);
        f = fopen(tmp, "w");
        if (!f || fprintf(f, "%u\n", ntohs(a.sin_port)) < 0 || fclose(f) != 0 ||
            rename(tmp, port_file) != 0) {
            perror("rawtcp serve: port file");
            close(ls);
            return 1;
        }
    } else {
        printf("%u\n", ntohs(a.sin_port));
        fflush(stdout);
    }
    while (!done) {
        int fd = accept4(ls, NULL, NULL, SOCK_CLOEXEC);

        if (fd < 0) {
            if (errno == EINTR)
                continue;
            break;
        }
        set_nodelay(fd);
        done = serve_conn(fd, &buf, &cap);
        close(fd);
    }
    if (buf)
        munmap(buf, cap);
    close(ls);
    return 0;
}

/* Sends a request header. Before a payload ('S') it is sent with MSG_MORE,
 * so it leaves in the payload's first segment, as libbaton sends a frame
 * header and its payload in one sendmsg. */
static int request(int fd, char kind, uint64_t len, uint32_t call)
{
    uint8_t hdr[HDR_BYTES];
    int i;

    hdr[0] = (uint8_t)kind;
    put_u64(hdr + 1, len);
    for (i = 0; i < 4; i++)
        hdr[9 + i] = (uint8_t)(call >> (8 * i));
    if (kind == 'S')
        return send(fd, hdr, sizeof(hdr), MSG_NOSIGNAL | MSG_MORE) == (ssize_t)sizeof(hdr) ? 0 : -1;
    return write_all(fd, hdr, sizeof(hdr));
}

/* Parses a comma list of numbers in lo..hi into v (at most max); the count,
 * or -1 (message printed). Each value is plain decimal digits, no sign,
 * space or leading zero, and no value is empty ("1,,2", "0,"): the values
 * name the printed figures (raw_send_1MiB_call64KiB_MBs), which
 * bench/transport.sh looks up by the list's own spelling. */
static int parse_list(const char *what, const char *s, unsigned long lo, unsigned long hi,
                      uint64_t *v, int max)
{
    const char *p = s;
    int n = 0;

    for (;;) {
        const char *q = p;
        unsigned long m = 0;
        int over = 0;

        while (*q >= '0' && *q <= '9') {
            if (m > (hi - (unsigned long)(*q - '0')) / 10)
                over = 1;
            else
                m = m * 10 + (unsigned long)(*q - '0');
            q++;
        }
        if (q == p || (*q != ',' && *q != '\0') || (*p == '0' && q - p > 1) || over || m < lo) {
            fprintf(stderr, "rawtcp: %s: '%s': want values in %lu..%lu, plain decimals "
                            "separated by commas, at most %d\n", what, s, lo, hi, max);
            return -1;
        }
        if (n == max) {
            fprintf(stderr, "rawtcp: %s: '%s': more than %d values\n", what, s, max);
            return -1;
        }
        v[n++] = m;
        if (*q == '\0')
            return n;
        p = q + 1;
    }
}

static int cmd_run(unsigned port, const char *mib_list, const char *call_list, unsigned rtt_iters,
                   unsigned handoff_kib, const char *phase, int quit)
{
    const size_t handoff = (size_t)handoff_kib << 10;
    struct sockaddr_in a;
    uint64_t sizes[MAX_SIZES], calls[MAX_CALLS];
    int n_sizes, n_calls, i, c;
    unsigned k;
    uint8_t *buf = NULL, b = 1;
    size_t cap = 0;
    int fd, rc = 1;
    const int do_stream = strcmp(phase, "rtt") != 0, do_rtt = strcmp(phase, "stream") != 0;

    n_sizes = parse_list("--mib-list", mib_list, 1, MAX_BYTES >> 20, sizes, MAX_SIZES);
    n_calls = parse_list("--call-kib-list", call_list, 0, 1u << 20, calls, MAX_CALLS);
    if (n_sizes < 0 || n_calls < 0)
        return 2;
    for (i = 0; i < n_sizes; i++) {
        sizes[i] <<= 20;
        if (sizes[i] > cap)
            cap = (size_t)sizes[i];
    }
    if (handoff > cap)
        cap = handoff;
    buf = malloc(cap ? cap : 1);
    if (!buf)
        return 1;
    memset(buf, 0xa5, cap ? cap : 1);
    fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    memset(&a, 0, sizeof(a));
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons((uint16_t)port);
    if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof(a)) != 0) {
        perror("rawtcp run: connect");
        goto out;
    }
    set_nodelay(fd);
    /* warm-up: each size once each way, so the server's buffer exists */
    for (i = 0; do_stream && i < n_sizes; i++)
        if (request(fd, 'S', sizes[i], 0) != 0 || write_all(fd, buf, (size_t)sizes[i]) != 0 ||
            read_all(fd, &b, 1) != 0 || request(fd, 'G', sizes[i], 0) != 0 ||
            read_all(fd, buf, (size_t)sizes[i]) != 0)
            goto io_fail;
    for (i = 0; do_stream && i < n_sizes; i++) {
        /* small sizes are repeated to about 64 MiB per figure */
        const unsigned reps = sizes[i] >= (64u << 20) ? 1 : (unsigned)((64u << 20) / sizes[i]);
        const unsigned long long mib = (unsigned long long)(sizes[i] >> 20);
        double best_s = 0, best_g = 0;
        uint64_t best_sc = 0, best_gc = 0;
        int poll_s = 0, poll_g = 0;

        for (c = 0; c < n_calls; c++) {
            const size_t call = (size_t)calls[c] << 10;
            double t0 = now(), t1, t2, s_mbs, g_mbs;
            unsigned r;

            for (r = 0; r < reps; r++)
                if (request(fd, 'S', sizes[i], (uint32_t)call) != 0 ||
                    write_calls(fd, buf, (size_t)sizes[i], call) != 0 || read_all(fd, &b, 1) != 0)
                    goto io_fail;
            t1 = now();
            for (r = 0; r < reps; r++)
                if (request(fd, 'G', sizes[i], (uint32_t)call) != 0 ||
                    read_calls(fd, buf, (size_t)sizes[i], call) != 0)
                    goto io_fail;
            t2 = now();
            s_mbs = (double)sizes[i] * reps / (t1 - t0) / 1e6;
            g_mbs = (double)sizes[i] * reps / (t2 - t1) / 1e6;
            printf("raw_send_%lluMiB_call%lluKiB_MBs=%.1f\n", mib, (unsigned long long)calls[c],
                   s_mbs);
            printf("raw_get_%lluMiB_call%lluKiB_MBs=%.1f\n", mib, (unsigned long long)calls[c],
                   g_mbs);
            if (s_mbs > best_s) {
                best_s = s_mbs;
                best_sc = calls[c];
            }
            if (g_mbs > best_g) {
                best_g = g_mbs;
                best_gc = calls[c];
            }
        }
        {
            /* the poll reader: one write call of the whole size, read by
             * recv(MSG_DONTWAIT) + poll, as batond and libbaton read */
            double t0 = now(), t1, t2, s_mbs, g_mbs;
            unsigned r;

            for (r = 0; r < reps; r++)
                if (request(fd, 's', sizes[i], 0) != 0 ||
                    write_poll(fd, buf, (size_t)sizes[i]) != 0 || read_all(fd, &b, 1) != 0)
                    goto io_fail;
            t1 = now();
            for (r = 0; r < reps; r++)
                if (request(fd, 'g', sizes[i], 0) != 0 ||
                    read_poll(fd, buf, (size_t)sizes[i]) != 0)
                    goto io_fail;
            t2 = now();
            s_mbs = (double)sizes[i] * reps / (t1 - t0) / 1e6;
            g_mbs = (double)sizes[i] * reps / (t2 - t1) / 1e6;
            printf("raw_send_%lluMiB_poll_MBs=%.1f\n", mib, s_mbs);
            printf("raw_get_%lluMiB_poll_MBs=%.1f\n", mib, g_mbs);
            if (s_mbs > best_s) {
                best_s = s_mbs;
                poll_s = 1;
            }
            if (g_mbs > best_g) {
                best_g = g_mbs;
                poll_g = 1;
            }
        }
        printf("raw_send_%lluMiB_MBs=%.1f\n", mib, best_s);
        if (poll_s)
            printf("raw_send_%lluMiB_best_reader=poll\n", mib);
        else
            printf("raw_send_%lluMiB_best_call_kib=%llu\n", mib, (unsigned long long)best_sc);
        printf("raw_get_%lluMiB_MBs=%.1f\n", mib, best_g);
        if (poll_g)
            printf("raw_get_%lluMiB_best_reader=poll\n", mib);
        else
            printf("raw_get_%lluMiB_best_call_kib=%llu\n", mib, (unsigned long long)best_gc);
    }
    if (do_rtt) {
        double t0;

        if (request(fd, 'E', (uint64_t)rtt_iters + 100, 0) != 0)
            goto io_fail;
        for (k = 0; k < 100; k++) /* warm-up */
            if (write_all(fd, &b, 1) != 0 || read_all(fd, &b, 1) != 0)
                goto io_fail;
        t0 = now();
        for (k = 0; k < rtt_iters; k++)
            if (write_all(fd, &b, 1) != 0 || read_all(fd, &b, 1) != 0)
                goto io_fail;
        printf("raw_rtt_us=%.2f\n", (now() - t0) / rtt_iters * 1e6);
    }
    if (do_rtt && handoff > 0) {
        const unsigned rounds = rtt_iters / 10 ? rtt_iters / 10 : 1;
        double t0 = 0;

        for (k = 0; k < rounds + 10; k++) { /* the first 10 warm up */
            if (k == 10)
                t0 = now();
            if (request(fd, 'G', handoff, 0) != 0 || read_all(fd, buf, handoff) != 0 ||
                request(fd, 'S', handoff, 0) != 0 || write_all(fd, buf, handoff) != 0 ||
                read_all(fd, &b, 1) != 0)
                goto io_fail;
        }
        printf("raw_handoff_us=%.2f\n", (now() - t0) / rounds * 1e6);
    }
    if (quit && request(fd, 'Q', 0, 0) != 0)
        goto io_fail;
    rc = 0;
    goto out;
io_fail:
    fprintf(stderr, "rawtcp run: connection failed\n");
out:
    if (fd >= 0)
        close(fd);
    free(buf);
    return rc;
}

int main(int argc, char **argv)
{
    const char *port_file = NULL, *mib_list = "1,64", *phase = "all",
               *call_list = "0,64,256,1024,4096";
    unsigned rtt_iters = 2000, handoff_kib = 256;
    int i, quit = 0, help = 0;

    signal(SIGPIPE, SIG_IGN);
    if (argc >= 2 && strcmp(argv[1], "serve") == 0) {
        for (i = 2; i < argc; i++) {
            if (strcmp(argv[i], "--port-file") == 0 && i + 1 < argc)
                port_file = argv[++i];
            else
                goto usage;
        }
        return cmd_serve(port_file);
    }
    if (argc >= 3 && strcmp(argv[1], "run") == 0) {
        const unsigned long port = strtoul(argv[2], NULL, 10);

        for (i = 3; i < argc; i++) {
            if (strcmp(argv[i], "--mib-list") == 0 && i + 1 < argc)
                mib_list = argv[++i];
            else if (strcmp(argv[i], "--call-kib-list") == 0 && i + 1 < argc)
                call_list = argv[++i];
            else if (strcmp(argv[i], "--rtt-iters") == 0 && i + 1 < argc)
                rtt_iters = (unsigned)strtoul(argv[++i], NULL, 10);
            else if (strcmp(argv[i], "--handoff-kib") == 0 && i + 1 < argc)
                handoff_kib = (unsigned)strtoul(argv[++i], NULL, 10);
            else if (strcmp(argv[i], "--phase") == 0 && i + 1 < argc)
                phase = argv[++i];
            else if (strcmp(argv[i], "--quit") == 0)
                quit = 1;
            else
                goto usage;
        }
        if (port < 1 || port > 65535 || rtt_iters < 1 || rtt_iters > 10000000 ||
            handoff_kib > (1u << 20) ||
            (strcmp(phase, "all") != 0 && strcmp(phase, "stream") != 0 &&
             strcmp(phase, "rtt") != 0))
            goto usage;
        return cmd_run((unsigned)port, mib_list, call_list, rtt_iters, handoff_kib, phase, quit);
    }
    if (argc == 2 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)) {
        help = 1;
        goto usage;
    }
usage:
    fprintf(help ? stdout : stderr,
            "usage: bench_rawtcp serve [--port-file FILE]\n"
            "       bench_rawtcp run PORT [--mib-list 1,64] [--call-kib-list 0,64,256,1024,4096]"
            " [--rtt-iters N] [--handoff-kib K] [--phase stream|rtt|all] [--quit]\n"
            "Raw loopback TCP, the reference of bench/transport.sh (its --help says more).\n");
    return help ? 0 : 2;
}
