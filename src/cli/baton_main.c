/* `baton`: the coordinator's command-line entry point. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/cli.h"
#include "compute/compute.h"
#include "model/gguf_write.h"

static void usage(FILE *f)
{
    fputs("usage: baton COMMAND [OPTIONS]\n"
          "\n"
          "commands:\n"
          "  run        generate text with a GGUF model split across batond servers\n"
          "  serve      serve such a model over HTTP (OpenAI-style completions)\n"
          "  info       print DEVICE_INFO of servers\n"
          "  inspect    print a GGUF file's metadata and tensor table (--check: are all\n"
          "             its values finite?)\n"
          "  tokenize   print the token ids of a text\n"
          "  bench      prefill/decode speed, TTFT, TPOT and per-step traffic\n"
          "  gen-model  write a deterministic synthetic GGUF (llama, qwen2, qwen3, gemma3)\n"
          "  quantize   convert a GGUF's matrices to q8_0, q4_0, q5_0, q5_1, f16, bf16\n"
          "             or f32, or to a preset mix: q4_k_m, q5_k_m, q6_k, q3_k_m, q2_k,\n"
          "             iq4_xs, iq4_nl\n"
          "  keygen     write a new key file (-o FILE) for authenticated servers\n"
          "\n"
          "`baton COMMAND --help` describes each command. `baton --version` prints the\n"
          "version.\n"
          "Exit status: 0 success, 1 runtime or file error, 2 usage error.\n",
          f);
}

int baton_cli_empty_output(const char *prog, const char *what, const char *path)
{
    if (path == NULL || path[0] != '\0')
        return 0;
    fprintf(stderr, "%s: %s: an empty path (see `%s --help`)\n", prog, what, prog);
    return 1;
}

int baton_cli_check_output(const char *prog, const char *what, const char *path,
                           int replaced_atomically, const char *input, const char *input_what)
{
    char dir[PATH_MAX];
    const char *slash = strrchr(path, '/');
    const char *sep = what[0] ? " " : "";
    struct stat st, in_st;
    int exists = stat(path, &st) == 0;

    if (path[0] == '\0') {
        fprintf(stderr, "%s: %s%san empty path\n", prog, what, what[0] ? ": " : "");
        return -1;
    }
    if (exists && input && stat(input, &in_st) == 0 && in_st.st_dev == st.st_dev &&
        in_st.st_ino == st.st_ino) {
        fprintf(stderr, "%s: %s%s%s and %s%s%s are the same file; write it elsewhere\n", prog,
                what, sep, path, input_what, input_what[0] ? " " : "", input);
        return -1;
    }

    if (!slash) {
        snprintf(dir, sizeof(dir), ".");
    } else if ((size_t)(slash - path) >= sizeof(dir)) {
        fprintf(stderr, "%s: %s%s%s: path too long\n", prog, what, sep, path);
        return -1;
    } else {
        size_t n = slash == path ? 1 : (size_t)(slash - path);

        memcpy(dir, path, n);
        dir[n] = '\0';
    }
    if (exists && S_ISDIR(st.st_mode)) {
        fprintf(stderr, "%s: %s%s%s: is a directory\n", prog, what, sep, path);
        return -1;
    }
    /* try what the command will do, rather than ask access(), which root
     * always passes (a /proc/x.json then failed only after the whole run) */
    if (replaced_atomically) {
        /* the writer's own temporary file (baton_gguf_tmp_path), created
         * and removed again */
        char tmp[PATH_MAX];
        struct stat lst;
        int fd;

        /* the write renames a new file over path: a device or a FIFO there
         * would be replaced (as root, -o /dev/null removed /dev/null), and
         * so would a link to one (-o /dev/stdout on a pipe) */
        if ((lstat(path, &lst) == 0 && !S_ISREG(lst.st_mode) && !S_ISLNK(lst.st_mode)) ||
            (stat(path, &lst) == 0 && !S_ISREG(lst.st_mode))) {
            fprintf(stderr,
                    "%s: %s%s%s: not a regular file (the output replaces the file at its path, "
                    "so it is written only to a regular file or a new one)\n",
                    prog, what, sep, path);
            return -1;
        }

        if (baton_gguf_tmp_path(path, tmp, sizeof(tmp)) != 0) {
            fprintf(stderr, "%s: %s%s%s: path too long\n", prog, what, sep, path);
            return -1;
        }
        fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOCTTY | O_NONBLOCK, 0600);
        if (fd < 0) {
            fprintf(stderr, "%s: %s%s%s: cannot create a file in %s: %s\n", prog, what, sep,
                    path, dir, strerror(errno));
            return -1;
        }
        close(fd);
        unlink(tmp);
        return 0;
    }
    {
        /* open for writing as the command will, without truncating; a file
         * the check creates (O_EXCL: it did not exist) is removed again, so
         * that a run that fails later leaves nothing behind. O_NONBLOCK: a
         * FIFO does not block here, and one with no reader yet (ENXIO) may
         * get one before the output is written */
        const int flags = O_WRONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK;
        int fd;

        /* a FIFO is not probed: opening and closing it would end its
         * reader's input (an EOF) before the real write */
        if (exists && S_ISFIFO(st.st_mode))
            return 0;
        fd = open(path, exists ? flags : flags | O_CREAT | O_EXCL, 0666);

        if (fd >= 0) {
            close(fd);
            if (!exists)
                unlink(path);
            return 0;
        }
        /* EEXIST: a dangling symbolic link (the write follows it) or a file
         * made since the stat; neither can be checked without leaving
         * something behind, so the write reports it */
        if (!exists && errno == EEXIST)
            return 0;
        if (exists)
            fprintf(stderr, "%s: %s%s%s: %s\n", prog, what, sep, path, strerror(errno));
        else
            fprintf(stderr, "%s: %s%s%s: cannot create a file in %s: %s\n", prog, what, sep,
                    path, dir, strerror(errno));
        return -1;
    }
}

/* 1 if name is one of baton's commands. */
static int is_command(const char *name)
{
    static const char *const cmds[] = {"run",     "serve",   "info",     "bench",  "gen-model",
                                       "quantize", "inspect", "tokenize", "keygen"};
    size_t i;

    for (i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++)
        if (strcmp(name, cmds[i]) == 0)
            return 1;
    return 0;
}

/* rc, or 1 after a message when a command that succeeded wrote to stdout
 * and not all of it got there (a full disk, a closed pipe): a script must
 * not read success from lost output. A failed command has said why. */
static int stdout_done(const char *prog, int rc)
{
    if (rc != 0)
        return rc;
    errno = 0;
    if (fflush(stdout) != 0 || ferror(stdout)) {
        fprintf(stderr, "%s: standard output: cannot write: %s\n", prog,
                errno ? strerror(errno) : "write error");
        return 1;
    }
    return 0;
}

static int dispatch(int argc, char **argv);

int main(int argc, char **argv)
{
    if (baton_cli_hold_std_fds() != 0) {
        fprintf(stderr, "baton: cannot open /dev/null for a closed stdin, stdout or stderr: %s\n",
                strerror(errno));
        return 1;
    }
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    if (strcmp(argv[1], "help") == 0 && argc > 2) {
        /* `baton help run` = `baton run --help` */
        char *help_argv[4] = {argv[0], argv[2], (char *)"--help", NULL};

        if (!is_command(argv[2])) {
            fprintf(stderr, "baton: unknown command '%s'\n", argv[2]);
            usage(stderr);
            return 2;
        }
        return dispatch(3, help_argv);
    }
    return dispatch(argc, argv);
}

static int dispatch(int argc, char **argv)
{
    static char prog[64];
    const char *sub;

    if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0 ||
        strcmp(argv[1], "help") == 0) {
        usage(stdout);
        return stdout_done("baton", 0);
    }
    if (strcmp(argv[1], "--version") == 0) {
        printf("baton %s\n", BATON_VERSION);
        return stdout_done("baton", 0);
    }
    /* getopt names the program by argv[0]: "baton run: unrecognized
     * option" reads better than "run: ..." */
    sub = argv[1];
    /* `baton run --version` as well as `baton --version` (only right after
     * the command: later, "--version" may be an option's value) */
    if (argc > 2 && strcmp(argv[2], "--version") == 0 && is_command(sub)) {
        printf("baton %s\n", BATON_VERSION);
        return stdout_done("baton", 0);
    }
    snprintf(prog, sizeof(prog), "baton %s", sub);
    argv[1] = prog;
    {
        int isa_ignored = 0;
        const char *kernels = baton_compute_kernels(&isa_ignored);

        if (isa_ignored) /* local stages compute here */
            fprintf(stderr,
                    "%s: BATON_CPU_ISA=%s ignored (not scalar, avx2 or avx512): kernels %s\n", prog,
                    getenv("BATON_CPU_ISA"), kernels);
    }
    if (strcmp(sub, "run") == 0)
        return stdout_done(prog, baton_cmd_run(argc - 1, argv + 1));
    if (strcmp(sub, "serve") == 0)
        return stdout_done(prog, baton_cmd_serve(argc - 1, argv + 1));
    if (strcmp(sub, "info") == 0)
        return stdout_done(prog, baton_cmd_info(argc - 1, argv + 1));
    if (strcmp(sub, "bench") == 0)
        return stdout_done(prog, baton_cmd_bench(argc - 1, argv + 1));
    if (strcmp(sub, "gen-model") == 0)
        return stdout_done(prog, baton_cmd_gen_model(argc - 1, argv + 1));
    if (strcmp(sub, "quantize") == 0)
        return stdout_done(prog, baton_cmd_quantize(argc - 1, argv + 1));
    if (strcmp(sub, "inspect") == 0)
        return stdout_done(prog, baton_cmd_inspect(argc - 1, argv + 1));
    if (strcmp(sub, "tokenize") == 0)
        return stdout_done(prog, baton_cmd_tokenize(argc - 1, argv + 1));
    if (strcmp(sub, "keygen") == 0)
        return stdout_done(prog, baton_cmd_keygen(argc - 1, argv + 1));
    fprintf(stderr, "baton: unknown command '%s'\n", sub);
    usage(stderr);
    return 2;
}
