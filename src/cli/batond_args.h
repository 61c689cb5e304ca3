/* batond's command line, apart from its main (src/cli/batond.c) so that the
 * fuzz harness fuzz/fuzz_batond_args.c runs the very code batond runs.
 * Order of use: batond_log_format_from_args, batond_split_eq_args,
 * baton_policy_default + baton_server_config_default,
 * batond_load_policy_arg, batond_parse_options. */
#ifndef BATON_CLI_BATOND_ARGS_H
#define BATON_CLI_BATOND_ARGS_H

#include "server/log.h"

struct baton_policy;
struct baton_server_config;

/* batond_parse_options's result when batond is to go on and serve. */
#define BATOND_ARGS_RUN (-1)

/* What the option loop sets besides the policy. The strings point into
 * argv (the caller's vector). */
struct batond_options {
    struct baton_policy *pol;        /* in: defaults and the --policy file */
    struct baton_server_config *cfg; /* quiet, encrypt, insecure_no_auth */
    const char *port_file, *key_path, *peer_key_path; /* NULL when not given */
    int print_policy;
    int use_seccomp; /* in: the default; --no-seccomp clears it */
};

/* An error line before the server runs, through the log (log.h): as text
 * "batond: MESSAGE" on stderr. kind: "usage" (exit 2) or "startup" (exit 1). */
void batond_say(const char *kind, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* The last valid --log-format F (or --log-format=F) of argv, else journal
 * when stderr is the journal's stream, else text. */
enum baton_log_format batond_log_format_from_args(int argc, char **argv);

/* argv with each "--name=value" given as "--name" "value" (the name is cut
 * at its '=' in place). A new vector of at most 2 * argc + 1 pointers into
 * argv's strings, owned by the caller (free), with *out_argc its count; NULL
 * when out of memory, or (*out_argc = -1, after saying so) when a flag that
 * takes no value is given one (--quiet=1). */
char **batond_split_eq_args(int argc, char **argv, int *out_argc);

/* Loads the file of each --policy FILE into pol. Returns 0, or after
 * printing the error 1 (the file cannot be read or is refused) or 2 (no
 * value). */
int batond_load_policy_arg(int argc, char **argv, struct baton_policy *pol);

/* The option loop over argv[1..argc) (as split by batond_split_eq_args):
 * policy flags through baton_policy_set (a --peer or --client list replaces
 * the file's), --key/--peer-key into key_file/peer_key_file, --encrypt into
 * both cfg and the policy. Returns BATOND_ARGS_RUN, 0 after --help (usage
 * on stdout) or --version, or 2 after printing a usage error. Reads no file
 * (--policy's value is skipped: batond_load_policy_arg read it). */
int batond_parse_options(int argc, char **argv, struct batond_options *o);

#endif
