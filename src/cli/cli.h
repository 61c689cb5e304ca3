/* Subcommands of the `baton` program. Each takes argv with argv[0] = the
 * subcommand name, parses its own options (and --help), prints errors to
 * stderr and returns the process exit code: 0 success, 1 runtime failure,
 * 2 usage error. The option helpers at the end serve batond too. */
#ifndef BATON_CLI_H
#define BATON_CLI_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

int baton_cmd_run(int argc, char **argv);     /* baton_run.c */
int baton_cmd_serve(int argc, char **argv);   /* baton_run.c */
int baton_cmd_info(int argc, char **argv);    /* baton_info.c */
int baton_cmd_inspect(int argc, char **argv); /* baton_inspect.c */
int baton_cmd_keygen(int argc, char **argv);  /* baton_keygen.c */
int baton_cmd_gen_model(int argc, char **argv); /* baton_genmodel.c */
int baton_cmd_quantize(int argc, char **argv);  /* baton_genmodel.c */
int baton_cmd_bench(int argc, char **argv);     /* baton_bench.c */
int baton_cmd_tokenize(int argc, char **argv);  /* baton_tokenize.c */

/* An empty output path (-o '', --json '') is a usage error: prints "PROG:
 * WHAT: an empty path (see `PROG --help`)" and returns 1 (the caller exits
 * 2); 0 for a NULL or non-empty path. (baton_main.c) */
int baton_cli_empty_output(const char *prog, const char *what, const char *path);

/* Checks, before any long work, that an output file can be written: path
 * is not empty, is not the file input (the model the command reads; NULL:
 * none) and is not a directory. Then it does what the write will do, as
 * access() answers yes to root for paths no one can write (/proc/x):
 * replaced_atomically (written to PATH.tmp.PID and renamed, gguf_write.c):
 * creates that temporary file and removes it; else opens path for writing
 * (O_NONBLOCK, no O_TRUNC), creating it if missing, and removes a file it
 * created. Leaves nothing behind. On failure prints "PROG: WHAT PATH:
 * reason", "PROG: WHAT PATH: cannot create a file in DIR: reason" or "PROG:
 * WHAT PATH and INPUT_WHAT INPUT are the same file; ..." (what, input_what:
 * the options, e.g. "--stats-json" and "--model", or "" for none) and
 * returns -1 (the caller exits 1); else 0. (baton_main.c) */
int baton_cli_check_output(const char *prog, const char *what, const char *path,
                           int replaced_atomically, const char *input, const char *input_what);

/* Prints ptr[0..len) as a quoted string. json: JSON escapes (RFC 8259),
 * invalid UTF-8 as U+FFFD, no truncation; text: C-style escapes for control
 * bytes, at most 160 bytes then "...(N bytes)". Control characters never
 * pass raw: C0 and DEL, and the C1 controls U+0080..U+009F (as \u00NN in
 * JSON, as \xc2\xNN in text); fuzz/fuzz_put_string.c checks this. (baton_inspect.c; baton
 * bench's --json uses it too) */
void baton_cli_put_string(FILE *f, const char *ptr, size_t len, int json);

/* Fills each of descriptors 0, 1 and 2 that is closed (`baton run ... >&-`)
 * with /dev/null, so that the next socket or file opened does not become
 * stdout or stderr (baton run's streamed text went into a server's
 * connection: SET_TENSOR failed: E_MAGIC). /dev/null is opened against the
 * stream's direction (stdin write-only, stdout and stderr read-only), so
 * that using it still fails as a closed descriptor does (EBADF) and a lost
 * stdout is still reported. Call first in main (baton and batond). Returns 0,
 * or -1 (errno set) when /dev/null cannot be opened. (cli_stdio.c) */
int baton_cli_hold_std_fds(void);

/* Parses the value s of integer option opt (as the user typed it, e.g. "-n",
 * "--ctx"): decimal digits only, in [min, max]. On failure prints to stderr
 * one of
 *   PROG: OPT: 'S' is not an integer            (empty, '+', space, 0x, 1.5, ...)
 *   PROG: OPT: 'S' is too large (at most MAX)   (also past 2^64 - 1)
 *   PROG: OPT: 'S' is too small (at least MIN)  (also '-' and digits)
 * and returns -1 (a usage error: the caller exits 2); else stores the value
 * and returns 0. (cli_args.c, linked into baton and batond) */
int baton_cli_parse_u64(const char *prog, const char *opt, const char *s, uint64_t min,
                        uint64_t max, uint64_t *out);
/* The same rules without a message: 0 (the value stored), or which of the
 * three messages applies (batond words its own, in its --log-format). */
#define BATON_CLI_NOT_INTEGER 1
#define BATON_CLI_TOO_LARGE 2
#define BATON_CLI_TOO_SMALL 3
int baton_cli_check_u64(const char *s, uint64_t min, uint64_t max, uint64_t *out);
/* The words that follow 'S' in the message of a nonzero why ("is not an
 * integer", "is too large (at most MAX)", "is too small (at least MIN)"),
 * written to buf (len bytes; BATON_CLI_WHY_LEN holds any of them); returns
 * buf. */
#define BATON_CLI_WHY_LEN 48
const char *baton_cli_u64_why(int why, uint64_t min, uint64_t max, char *buf, size_t len);
/* "on" -> 1, "off" -> 0 into *out; anything else: "PROG: OPT: 'S' is not on or
 * off" to stderr and -1. */
int baton_cli_parse_onoff(const char *prog, const char *opt, const char *s, int *out);
/* "f32" / "f16" -> BATON_TYPE_F32 / BATON_TYPE_F16 (core/types.h) into *out
 * (--kv-type); anything else: "PROG: OPT: 'S' is not f32 or f16" to stderr
 * and -1. */
int baton_cli_parse_kv_type(const char *prog, const char *opt, const char *s, uint32_t *out);
/* baton_cli_parse_u64 for a uint32_t (max at most UINT32_MAX). */
int baton_cli_parse_u32(const char *prog, const char *opt, const char *s, uint32_t min,
                        uint32_t max, uint32_t *out);

/* Parses the value s of a decimal option opt (--temp, --top-p): a plain
 * decimal number (an optional '-', digits with at most one '.', an optional
 * exponent: "0.25", "25e-2"; no hex float, "inf", "nan", space or '+')
 * within [lo, hi], or (lo, hi] when lo_open, also once rounded to a float.
 * On failure prints to stderr one of
 *   PROG: OPT: 'S' is not a decimal number (digits with an optional '.' and exponent, ...)
 *   PROG: OPT: 'S' is not in [LO, HI]             ("(LO, HI]" when lo_open)
 *   PROG: OPT: 'S' is not in [LO, HI] as a 32-bit float (F)
 * (LO, HI and F as %g) and returns -1 (a usage error); else stores the float
 * and returns 0. (cli_args.c; fuzz target cli_args) */
int baton_cli_parse_float(const char *prog, const char *opt, const char *s, double lo, double hi,
                          int lo_open, float *out);

/* The lines of a --prompt-file. */
#define BATON_CLI_MAX_LINES 100000u      /* prompts in one file */
#define BATON_CLI_MAX_FILE (64ull << 20) /* bytes of one file */
struct baton_cli_lines {
    char **line; /* n NUL-terminated lines, owned */
    size_t n;
};

/* Splits buf[0..len) (any bytes, not NUL-terminated) into lines: a UTF-8
 * byte order mark (EF BB BF) at buf[0] is skipped; each line ends at LF, at
 * CR LF, at a CR alone (the line ending of old Mac files) or at len, so no
 * line holds a CR or an LF ("a\r\r\nb" is "a", an empty line, "b");
 * blank lines (empty, or only spaces and tabs) are skipped.
 * Returns 0; BATON_E_FORMAT when a line holds a NUL byte (a prompt is a C
 * string), BATON_E_LIMIT past BATON_CLI_MAX_LINES lines, BATON_E_NOMEM;
 * on error *bad_line is the 1-based line at fault, counted by the endings
 * above with blank lines too (0 for NOMEM), and out
 * holds nothing. The caller frees out with baton_cli_lines_free.
 * (cli_lines.c; fuzz target prompt_lines) */
int baton_cli_split_lines(const char *buf, size_t len, struct baton_cli_lines *out,
                          size_t *bad_line);
/* Reads path (at most BATON_CLI_MAX_FILE bytes) and splits it. Returns 0
 * (at least one line), 1 (cannot read: "PROG: WHAT PATH: reason" on
 * stderr) or 2 (no lines, a NUL byte, too many lines or too large: said). */
int baton_cli_read_lines(const char *prog, const char *what, const char *path,
                         struct baton_cli_lines *out);
void baton_cli_lines_free(struct baton_cli_lines *l);

#endif
