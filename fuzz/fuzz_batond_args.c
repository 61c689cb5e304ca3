/* Fuzz target batond_args: batond's command line (src/cli/batond_args.c:
 * batond_log_format_from_args, batond_split_eq_args, batond_parse_options,
 * and through them baton_policy_set, baton_cli_parse_u32 and
 * baton_log_format_parse), exactly as batond's main runs them, from the
 * policy defaults (no --policy file is read: the loop skips its value).
 *
 * Input: the arguments after argv[0] = "batond", separated by NUL bytes (at
 * most 64; an empty input is no argument, a trailing NUL ends the last).
 *
 * Properties:
 *   - the result is BATOND_ARGS_RUN, 0 or 2; the "--name=value" splitter
 *     fails only with out_argc -1 (a flag that takes no value given one);
 *   - the same arguments parsed again (fresh copies: the splitter writes
 *     into them) give the same result, options and policy text;
 *   - BATOND_ARGS_RUN: the policy's text (baton_policy_format) parses back
 *     (baton_policy_parse) to the same text, and given back as options
 *     "--KEY=VALUE", one per line of that text, from the defaults, it gives
 *     the same policy again (each value batond accepted on its command line
 *     it accepts again in the form --print-policy shows), except values that
 *     begin with "--" (an option's value may not: "--key=--x" is taken as a
 *     path, "--key_file=--x" as a missing value) or hold '=' after a flag
 *     spelled with '=' (not formed here); --port's value, when the last
 *     --port is a plain decimal, is the policy's port; the key paths are
 *     the arguments that followed --key / --peer-key.
 */
#include "fuzz_common.h"

#include "baton/status.h"
#include "cli/batond_args.h"
#include "server/log.h"
#include "server/policy.h"
#include "server/server.h"

#define MAX_ARGS 64
#define POLICY_TEXT_MAX (1u << 20)

struct parsed {
    int rc;
    char *text; /* the policy's text, when rc is BATOND_ARGS_RUN */
    char key_path[4096], peer_key_path[4096], port_file[4096];
    int print_policy, use_seccomp, quiet, encrypt, insecure;
};

static char *format_policy(const struct baton_policy *p)
{
    size_t need = baton_policy_format(p, NULL, 0);
    char *t = malloc(need + 1);
    FUZZ_CHECK(t != NULL, "malloc");
    FUZZ_CHECK(baton_policy_format(p, t, need + 1) == need, "format length changed");
    return t;
}

static void copy_opt(char *dst, size_t cap, const char *s)
{
    snprintf(dst, cap, "%s", s ? s : "(none)");
}

/* Splits and parses argv[0..argc) (copied first). */
static void run(int argc, char *const *argv_in, struct parsed *out, struct baton_policy *pol)
{
    char **copies = malloc(((size_t)argc + 1) * sizeof *copies);
    FUZZ_CHECK(copies != NULL, "malloc");
    for (int i = 0; i < argc; i++) {
        copies[i] = strdup(argv_in[i]);
        FUZZ_CHECK(copies[i] != NULL, "strdup");
    }
    copies[argc] = NULL;
    memset(out, 0, sizeof *out);
    baton_log_set_format(batond_log_format_from_args(argc, copies));

    int n = 0;
    char **args = batond_split_eq_args(argc, copies, &n);
    if (args == NULL) {
        FUZZ_CHECK(n == -1, "splitter failed without a reason (out_argc %d)", n);
        out->rc = 2;
    } else {
        FUZZ_CHECK(n >= argc && n <= 2 * argc, "split count %d of %d", n, argc);
        FUZZ_CHECK(args[n] == NULL, "split vector not terminated");
        struct baton_server_config cfg;
        baton_server_config_default(&cfg);
        baton_policy_default(pol);
        struct batond_options o = {.pol = pol, .cfg = &cfg, .use_seccomp = 1};
        out->rc = batond_parse_options(n, args, &o);
        FUZZ_CHECK(out->rc == BATOND_ARGS_RUN || out->rc == 0 || out->rc == 2, "result %d",
                   out->rc);
        if (out->rc == BATOND_ARGS_RUN) {
            out->text = format_policy(pol);
            copy_opt(out->key_path, sizeof out->key_path, o.key_path);
            copy_opt(out->peer_key_path, sizeof out->peer_key_path, o.peer_key_path);
            copy_opt(out->port_file, sizeof out->port_file, o.port_file);
            out->print_policy = o.print_policy;
            out->use_seccomp = o.use_seccomp;
            out->quiet = cfg.quiet;
            out->encrypt = cfg.encrypt;
            out->insecure = cfg.insecure_no_auth;
            FUZZ_CHECK(!cfg.encrypt || pol->encrypt, "--encrypt not in the policy");
        }
        free(args);
    }
    baton_log_set_format(BATON_LOG_TEXT);
    for (int i = 0; i < argc; i++)
        free(copies[i]);
    free(copies);
}

static int plain_decimal(const char *s, uint32_t *v)
{
    uint64_t x = 0;
    if (*s == '\0')
        return 0;
    for (; *s; s++) {
        if (*s < '0' || *s > '9')
            return 0;
        x = x * 10 + (uint64_t)(*s - '0');
        if (x > 65535)
            return 0;
    }
    *v = (uint32_t)x;
    return 1;
}

/* --port's value as the loop takes it: the last "--port V" or "--port=V" whose
 * V it did not skip as another option's value. Only for inputs whose every
 * argument begins with "--" or follows one taking a value is this simple,
 * so it is checked only when the one --port is the last two arguments. */
static void check_port(int argc, char *const *argv, const struct baton_policy *pol)
{
    uint32_t v;
    int ports = 0;
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "--port") || !strncmp(argv[i], "--port=", 7))
            ports++;
    if (ports != 1)
        return;
    if (argc >= 3 && !strcmp(argv[argc - 2], "--port") && plain_decimal(argv[argc - 1], &v))
        FUZZ_CHECK(pol->port == v, "--port %s gave port %u", argv[argc - 1], pol->port);
    if (argc >= 2 && !strncmp(argv[argc - 1], "--port=", 7) && plain_decimal(argv[argc - 1] + 7, &v))
        FUZZ_CHECK(pol->port == v, "%s gave port %u", argv[argc - 1], pol->port);
}

/* The policy text as options "--KEY=VALUE"; 0 when a value cannot be given
 * that way (see the top of the file). */
static int text_to_args(const char *text, char **argv, int *argc, char *store, size_t cap)
{
    int n = 1;
    size_t at = 0;
    argv[0] = "batond";
    for (const char *line = text; *line;) {
        const char *end = strchr(line, '\n');
        size_t len = end ? (size_t)(end - line) : strlen(line);
        const char *eq = memchr(line, '=', len);
        if (len > 0 && line[0] != '#' && eq != NULL) {
            size_t kl = (size_t)(eq - line);
            while (kl > 0 && line[kl - 1] == ' ')
                kl--;
            const char *val = eq + 1;
            while (*val == ' ')
                val++;
            size_t vl = len - (size_t)(val - line);
            if (vl >= 2 && val[0] == '-' && val[1] == '-')
                return 0;
            if (kl == 7 && !memcmp(line, "encrypt", 7)) {
                /* the policy key is also the flag --encrypt, which takes no value */
                if (vl == 3 && !memcmp(val, "yes", 3))
                    argv[n++] = "--encrypt";
                line += len + (end != NULL);
                continue;
            }
            if (n >= 512 || at + kl + vl + 4 > cap)
                return 0;
            argv[n++] = store + at;
            store[at++] = '-';
            store[at++] = '-';
            memcpy(store + at, line, kl);
            at += kl;
            store[at++] = '=';
            memcpy(store + at, val, vl);
            at += vl;
            store[at++] = '\0';
        }
        line += len + (end != NULL);
    }
    *argc = n;
    return 1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static struct baton_policy pol, pol2, pol3;
    uint8_t *in = fuzz_dup(data, size);
    char *buf = malloc(size + 1);
    char *argv[MAX_ARGS + 1];
    int argc = 1;
    FUZZ_CHECK(buf != NULL, "malloc");
    memcpy(buf, in, size);
    buf[size] = '\0';
    argv[0] = "batond";
    for (size_t at = 0; at < size && argc < MAX_ARGS;) {
        argv[argc++] = buf + at;
        at += strlen(buf + at) + 1;
    }
    argv[argc] = NULL;

    struct parsed a, b;
    run(argc, argv, &a, &pol);
    run(argc, argv, &b, &pol2);
    FUZZ_CHECK(a.rc == b.rc, "result %d then %d", a.rc, b.rc);
    if (a.rc == BATOND_ARGS_RUN) {
        FUZZ_CHECK(strcmp(a.text, b.text) == 0, "policy text differs between runs");
        FUZZ_CHECK(!strcmp(a.key_path, b.key_path) && !strcmp(a.peer_key_path, b.peer_key_path) &&
                       !strcmp(a.port_file, b.port_file) && a.print_policy == b.print_policy &&
                       a.use_seccomp == b.use_seccomp && a.quiet == b.quiet &&
                       a.encrypt == b.encrypt && a.insecure == b.insecure,
                   "options differ between runs");
        check_port(argc, argv, &pol);

        /* the text parses back to itself */
        char err[512];
        baton_policy_default(&pol3);
        int rc = baton_policy_parse(&pol3, a.text, strlen(a.text), "fuzz", err, sizeof err);
        FUZZ_CHECK(rc == 0, "formatted policy refused: %s\n%s", err, a.text);
        char *t3 = format_policy(&pol3);
        FUZZ_CHECK(strcmp(t3, a.text) == 0, "policy text not a fixed point:\n%s\n--\n%s", a.text,
                   t3);
        free(t3);

        /* and given back as options */
        static char *args2[513];
        static char store[POLICY_TEXT_MAX];
        int argc2 = 0;
        if (strlen(a.text) < sizeof store / 2 &&
            text_to_args(a.text, args2, &argc2, store, sizeof store)) {
            struct parsed c;
            run(argc2, args2, &c, &pol3);
            FUZZ_CHECK(c.rc == BATOND_ARGS_RUN, "the policy as options refused (%d):\n%s", c.rc,
                       a.text);
            FUZZ_CHECK(strcmp(c.text, a.text) == 0, "the policy as options differs:\n%s\n--\n%s",
                       a.text, c.text);
            free(c.text);
        }
    }
    free(a.text);
    free(b.text);
    free(buf);
    free(in);
    return 0;
}
