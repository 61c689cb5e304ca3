/* Regression tests for faults the fuzz targets found in src/server
 * (inputs kept in fuzz/regressions/<target>/).
 *
 * policy, peer-bracket-in-host-{file,set}: a peer value whose bracketed
 * host itself starts with '[' ("[[1]:5") was accepted with host "[1"; the
 * formatter brackets only hosts containing ':', so it wrote "peer = [1:5",
 * which baton_policy_parse rejects, against policy.h's promise that
 * baton_policy_format's text parses back to the same policy. Fixed in
 * baton_net_split_hostport (brackets inside a host are refused); whatever
 * the fix, a peer value is either refused or survives format -> parse
 * unchanged.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "baton/status.h"
#include "server/policy.h"

static const char *const bracket_hosts[] = {"[[1]:5", "[[x]:65535", "[[a.b]:7340", "[[::1]:5"};

/* p was accepted: its formatted text must parse back to the same peers. */
static void assert_peers_round_trip(const struct baton_policy *p)
{
    static char text[1 << 16];
    char err[256];
    size_t n = baton_policy_format(p, text, sizeof text);
    assert_true(n < sizeof text);
    struct baton_policy *q = calloc(1, sizeof *q);
    assert_non_null(q);
    baton_policy_default(q);
    int rc = baton_policy_parse(q, text, n, "format", err, sizeof err);
    if (rc != 0)
        fail_msg("formatted policy does not parse: %s", err);
    assert_int_equal(q->n_peers, p->n_peers);
    for (uint32_t i = 0; i < p->n_peers; i++) {
        assert_string_equal(q->peers[i].host, p->peers[i].host);
        assert_int_equal(q->peers[i].port, p->peers[i].port);
    }
    free(q);
}

static void test_policy_peer_bracket_host_file(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof bracket_hosts / sizeof bracket_hosts[0]; i++) {
        char line[64], err[256];
        int len = snprintf(line, sizeof line, "peer = %s\n", bracket_hosts[i]);
        struct baton_policy *p = calloc(1, sizeof *p);
        assert_non_null(p);
        baton_policy_default(p);
        int rc = baton_policy_parse(p, line, (size_t)len, "t", err, sizeof err);
        assert_true(rc == 0 || rc == BATON_E_FORMAT);
        if (rc == 0)
            assert_peers_round_trip(p);
        free(p);
    }
}

static void test_policy_peer_bracket_host_set(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof bracket_hosts / sizeof bracket_hosts[0]; i++) {
        char err[256];
        struct baton_policy *p = calloc(1, sizeof *p);
        assert_non_null(p);
        baton_policy_default(p);
        int rc = baton_policy_set(p, "peer", bracket_hosts[i], err, sizeof err);
        assert_true(rc == 0 || rc == BATON_E_FORMAT);
        if (rc == 0)
            assert_peers_round_trip(p);
        free(p);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_policy_peer_bracket_host_file),
        cmocka_unit_test(test_policy_peer_bracket_host_set),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
