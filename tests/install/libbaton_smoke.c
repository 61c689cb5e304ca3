/* A client built against an installed libbaton (tests/integration/
 * test_install.sh): only the installed headers, linked through pkg-config
 * or find_package(baton).
 *
 *   libbaton_smoke HOST PORT KEYFILE
 *
 * Connects with the key, allocates a 16-byte buffer, writes four F32
 * values, reads them back and prints one line the test compares:
 *   "version V authenticated A threads T roundtrip ok stale E_STALE_HANDLE"
 * Exit 0 only when every call succeeded and the bytes came back equal. */
#include <baton/auth/auth.h>
#include <baton/client.h>
#include <baton/status.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv)
{
    static const float values[4] = {1.5f, -2.0f, 3.25f, 1e6f};
    float back[4] = {0};
    char err[256];
    struct baton_key *key = NULL;
    struct baton_conn *c = NULL;
    struct baton_conn_options o;
    struct baton_device_info info;
    struct baton_tensor_desc t;
    uint64_t handle = 0;
    int rc, code = 1;

    if (argc != 4) {
        fprintf(stderr, "usage: libbaton_smoke HOST PORT KEYFILE\n");
        return 2;
    }
    if (baton_auth_init() != 0 || baton_key_open(argv[3], &key, err, sizeof err) != 0) {
        fprintf(stderr, "key: %s\n", err);
        return 1;
    }
    memset(&o, 0, sizeof o);
    o.timeout_ms = 10000;
    o.key = key;
    o.role = BATON_ROLE_CLIENT;
    rc = baton_conn_connect_ex(argv[1], (uint16_t)atoi(argv[2]), &o, &c);
    if (rc == 0)
        rc = baton_device_info(c, &info);
    if (rc == 0)
        rc = baton_alloc_buffer(c, sizeof values, &handle);
    if (rc == 0)
        rc = baton_tensor_init(&t, handle, 0, BATON_TYPE_F32, 4, 1, 1, 1);
    if (rc == 0)
        rc = baton_set_tensor(c, &t, 0, values, sizeof values);
    if (rc == 0)
        rc = baton_get_tensor(c, &t, 0, back, sizeof back);
    if (rc == 0)
        rc = baton_free_buffer(c, handle);
    if (rc != 0) {
        fprintf(stderr, "libbaton_smoke: %s\n", baton_status_str(rc));
        goto out;
    }
    /* a freed handle is stale: the status comes from the server */
    rc = baton_get_tensor(c, &t, 0, back, sizeof back);
    printf("version %u authenticated %d threads %u roundtrip %s stale %s\n", info.version,
           baton_conn_authenticated(c), info.n_threads,
           memcmp(values, back, sizeof values) == 0 ? "ok" : "differs", baton_status_name(rc));
    code = memcmp(values, back, sizeof values) == 0 && rc == BATON_E_STALE_HANDLE ? 0 : 1;
out:
    baton_conn_close(c);
    baton_key_free(key);
    return code;
}
