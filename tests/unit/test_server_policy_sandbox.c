/* src/server/sandbox.c: the compiled-in list is exactly policy/seccomp.list,
 * every name resolves, and an installed filter (in a forked child) allows
 * the listed calls and threads, the peer-link socket (AF_INET, SOCK_STREAM |
 * SOCK_CLOEXEC | SOCK_NONBLOCK) and fcntl F_GETFL/F_SETFL, answers clone3
 * with ENOSYS, and kills the process with SIGSYS on a call that is not
 * listed, including socket with other arguments and other fcntl commands. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "baton/status.h"
#include "server/sandbox.h"

static void test_list_matches_file(void **state)
{
    const char *src = getenv("SRC_DIR");
    char path[4096], line[512];
    size_t n, k = 0;
    const struct baton_sandbox_entry *e = baton_sandbox_list(&n);
    if (!src)
        skip();
    snprintf(path, sizeof path, "%s/policy/seccomp.list", src);
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    while (fgets(line, sizeof line, f)) {
        char *hash = strchr(line, '#');
        if (hash)
            *hash = '\0';
        char name[128];
        if (sscanf(line, " %127s", name) != 1)
            continue;
        size_t len = strlen(name);
        int optional = len > 0 && name[len - 1] == '?';
        if (optional)
            name[len - 1] = '\0';
        assert_true(k < n);
        assert_string_equal(e[k].name, name);
        assert_int_equal(e[k].optional, optional);
        k++;
    }
    fclose(f);
    assert_int_equal(k, n);
}

static void test_names_resolve(void **state)
{
    char err[256] = "";
    size_t n, optional = 0;
    const struct baton_sandbox_entry *e = baton_sandbox_list(&n);
    for (size_t i = 0; i < n; i++)
        optional += (size_t)e[i].optional;
    int rc = baton_sandbox_check(err, sizeof err);
    if (rc < 0)
        fail_msg("%s", err);
    /* every required name, and perhaps some optional ones */
    assert_true((size_t)rc >= n - optional && (size_t)rc <= n);
}

static void *thread_main(void *arg)
{
    *(int *)arg = 42;
    return NULL;
}

/* A thread whose arena grows and shrinks: blocks below the mmap threshold
 * come from the thread's own heap, and freeing them all leaves a free top
 * that glibc trims (shrink_heap), which first reads
 * /proc/sys/vm/overcommit_memory unless the sandbox settled the trim
 * threshold (sandbox.c settle_libc). A peer sender thread frees its staged
 * copies like this. */
static void *arena_main(void *arg)
{
    enum { N_BLOCKS = 64, BLOCK = 64 * 1024 };
    void *b[N_BLOCKS];
    for (int round = 0; round < 4; round++) {
        for (int i = 0; i < N_BLOCKS; i++) {
            b[i] = malloc(BLOCK);
            if (!b[i])
                return NULL;
            memset(b[i], i, BLOCK);
        }
        for (int i = N_BLOCKS - 1; i >= 0; i--)
            free(b[i]);
    }
    *(int *)arg = 43;
    return NULL;
}

/* In a child: install, check what must work (reported through the pipe as
 * one byte per passed step), then make the forbidden call `which`. */
static void child(int wfd, int which)
{
    char err[256];
    uint8_t ok = 1;
    if (baton_sandbox_install(err, sizeof err) != 0)
        _exit(10);
    if (write(wfd, &ok, 1) != 1) /* step 1: installed, write allowed */
        _exit(11);
    errno = 0;
    long r = syscall(SYS_clone3, NULL, (size_t)0);
    if (r != -1 || errno != ENOSYS)
        _exit(12);
    if (write(wfd, &ok, 1) != 1) /* step 2: clone3 gave ENOSYS */
        _exit(11);
    pthread_t t;
    int v = 0;
    if (pthread_create(&t, NULL, thread_main, &v) != 0 || pthread_join(t, NULL) != 0 || v != 42)
        _exit(13);
    if (pthread_create(&t, NULL, arena_main, &v) != 0 || pthread_join(t, NULL) != 0 || v != 43)
        _exit(13);
    void *m = malloc(1 << 24); /* large: mmap, then munmap */
    if (!m)
        _exit(14);
    memset(m, 1, 1 << 24);
    free(m);
    if (write(wfd, &ok, 1) != 1) /* step 3: threads and memory work */
        _exit(11);
    int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    int fl = s >= 0 ? fcntl(s, F_GETFL) : -1;
    if (s < 0 || fl < 0 || fcntl(s, F_SETFL, fl & ~O_NONBLOCK) != 0 || close(s) != 0)
        _exit(15);
    if (write(wfd, &ok, 1) != 1) /* step 4: a peer-link socket works */
        _exit(11);
    switch (which) {
    case 0:
        (void)open("/etc/hostname", O_RDONLY | O_CLOEXEC);
        break;
    case 1:
        (void)socket(AF_INET, SOCK_STREAM, 0);
        break;
    case 2:
        (void)syscall(SYS_getppid);
        break;
    case 3: {
        char *argv[] = {"/bin/true", NULL};
        execv(argv[0], argv);
        break;
    }
    case 4: /* a socket without CLOEXEC */
        (void)socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
        break;
    case 5: /* a datagram socket */
        (void)socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        break;
    default: /* another fcntl command */
        (void)fcntl(wfd, F_SETFD, 0);
        break;
    }
    _exit(0); /* reached only if the forbidden call was allowed */
}

static void test_filter_in_child(void **state)
{
    if (baton_sandbox_sanitizer_build())
        skip(); /* sanitizer runtimes need calls outside the list */
    for (int which = 0; which < 7; which++) {
        int fds[2];
        assert_int_equal(pipe2(fds, O_CLOEXEC), 0);
        pid_t pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
            close(fds[0]);
            child(fds[1], which);
        }
        close(fds[1]);
        uint8_t steps[8];
        size_t got = 0;
        ssize_t r;
        while ((r = read(fds[0], steps + got, sizeof steps - got)) > 0)
            got += (size_t)r;
        close(fds[0]);
        int st = 0;
        assert_int_equal(waitpid(pid, &st, 0), pid);
        if (got != 4 || !WIFSIGNALED(st) || WTERMSIG(st) != SIGSYS)
            fail_msg("forbidden call %d: %zu steps passed, status %#x (exit %d, signal %d)",
                     which, got, st, WIFEXITED(st) ? WEXITSTATUS(st) : -1,
                     WIFSIGNALED(st) ? WTERMSIG(st) : -1);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_list_matches_file),
        cmocka_unit_test(test_names_resolve),
        cmocka_unit_test(test_filter_in_child),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
