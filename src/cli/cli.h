/* Subcommands of the `baton` program. Each takes argv with argv[0] = the
 * subcommand name, parses its own options (and --help), prints errors to
 * stderr and returns the process exit code: 0 success, 1 runtime failure,
 * 2 usage error. */
#ifndef BATON_CLI_H
#define BATON_CLI_H

int baton_cmd_run(int argc, char **argv);     /* baton_run.c */
int baton_cmd_info(int argc, char **argv);    /* baton_info.c */
int baton_cmd_inspect(int argc, char **argv); /* baton_inspect.c */
int baton_cmd_keygen(int argc, char **argv);  /* baton_keygen.c */
int baton_cmd_gen_model(int argc, char **argv); /* baton_genmodel.c */
int baton_cmd_quantize(int argc, char **argv);  /* baton_genmodel.c */
int baton_cmd_bench(int argc, char **argv);     /* baton_bench.c */

/* Checks, before any long work, that an output file can be written: the
 * directory of path exists and is writable and path is not a directory;
 * unless replaced_atomically (written to a temporary file and renamed), an
 * existing path must be writable too. Creates nothing. On failure prints
 * "PROG: WHAT PATH: reason" (what: the option, e.g. "--stats-json", or
 * "" for none) and returns -1; else 0. (baton_main.c) */
int baton_cli_check_output(const char *prog, const char *what, const char *path,
                           int replaced_atomically);

#endif
