/* batond's system-call sandbox: a seccomp allow-list installed for every
 * thread of the process once setup is done (DESIGN.md, "Process").
 *
 * The list comes from policy/seccomp.list (one system call name per line,
 * '#' comments, a trailing '?' marks a call that may not exist on every
 * architecture). policy/seccomp.cmake turns it into a C array in the build
 * directory at build time; baton_sandbox_install resolves every name with
 * seccomp_syscall_resolve_name before it builds the filter, so an unknown
 * name stops batond at start (and test_server_policy_sandbox fails in
 * `make check`).
 *
 * Filter (libseccomp): default action SCMP_ACT_KILL_PROCESS; every listed
 * call allowed; socket allowed only as (AF_INET or AF_INET6, SOCK_STREAM |
 * SOCK_CLOEXEC | SOCK_NONBLOCK) and fcntl only with F_GETFL or F_SETFL (the
 * outbound peer links); clone3 answered with ENOSYS (SCMP_ACT_ERRNO), so glibc
 * falls back to clone; SCMP_FLTATR_CTL_TSYNC so the filter applies to all
 * threads already running (the compute pool, connection threads), and new
 * threads inherit it. The filter also sets no_new_privs. Before loading
 * it, glibc's malloc arena limit is fixed (M_ARENA_MAX, glibc's default
 * value), so malloc never needs to read /sys later.
 *
 * Install it after everything that needs other calls has run: listening
 * socket bound, keys loaded (libsodium initialised), peers resolved, port
 * file written, signal handlers set. Sanitizer runtimes (ASan, LSan) use
 * calls outside the list (LSan's ptrace at exit): run them with
 * `batond --no-seccomp`.
 */
#ifndef BATON_SERVER_SANDBOX_H
#define BATON_SERVER_SANDBOX_H

#include <stddef.h>

/* One entry of the compiled-in list. */
struct baton_sandbox_entry {
    const char *name;
    int optional; /* 1: skipped when this architecture has no such call */
};

/* The compiled-in list (generated from policy/seccomp.list) and its length. */
const struct baton_sandbox_entry *baton_sandbox_list(size_t *n);

/* Resolves every name of the list for the native architecture. Returns the
 * number of calls that will be allowed (>= 0), or BATON_E_NOT_FOUND with
 * err naming the first name that is not optional and does not resolve. */
int baton_sandbox_check(char *err, size_t err_len);

/* Builds and loads the filter described above for the whole process.
 * Returns 0, BATON_E_NOT_FOUND (an unknown name, err says which),
 * BATON_E_NOMEM or BATON_E_IO (libseccomp refused: err has its message).
 * Irreversible. */
int baton_sandbox_install(char *err, size_t err_len);

/* 1 when this binary was built with a sanitizer (ASan/UBSan/TSan), whose
 * runtimes need system calls outside the list; batond then defaults to no
 * sandbox. */
int baton_sandbox_sanitizer_build(void);

#endif
