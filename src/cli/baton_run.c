/* `baton run`: options -> struct baton_run_config -> baton_run(). */
#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/cli.h"
#include "compute/compute.h"
#include "model/chat.h"
#include "model/gguf.h"
#include "model/llama.h"
#include "model/run.h"

static void run_usage(FILE *f)
{
    fputs("usage: baton run --model FILE --prompt TEXT [options]\n"
          "       baton run --model FILE --prompt-file FILE [--parallel N] [options]\n"
          "       baton run --model FILE --chat --interactive [options]\n"
          "\n"
          "Generates text with a GGUF model (llama, qwen2, qwen3, gemma3) whose layers are\n"
          "split across batond servers (or in-process stages), streaming it to stdout.\n"
          "\n"
          "  -m, --model FILE     GGUF model (architecture llama, qwen2, qwen3 or gemma3)\n"
          "  -p, --prompt TEXT    prompt text\n"
          "  --prompt-ids LIST    the prompt as token ids instead of text, separated by\n"
          "                       commas or spaces (\"1,17,42\"); no BOS is added\n"
          "  --prompt-file FILE   one prompt per line (blank lines skipped): each is its\n"
          "                       own sequence (seed --seed + N - 1); the N-th prompt's\n"
          "                       text comes out as lines \"[N] text\" when it ends, or\n"
          "                       in --output-dir. A line ends at LF, CR LF or a CR\n"
          "                       alone (old Mac files), so no prompt holds a CR; a\n"
          "                       UTF-8 byte order mark at the start is skipped\n"
          "  --parallel N         sequences decoded together in one step, 1..256 (default\n"
          "                       1; with --prompt-file): each holds --ctx positions of\n"
          "                       KV cache; a sequence that ends frees them for the next\n"
          "                       prompt; once fewer decode than a group's slots, steps\n"
          "                       carry only their rows (padded to a power of two)\n"
          "  --continuous on|off  with --parallel (default off): a prompt admitted into a\n"
          "                       freed slot rides in the decode steps, --ubatch tokens\n"
          "                       of it beside the other sequences' tokens, instead of\n"
          "                       a prefill that holds them back (continuous batching)\n"
          "  --output-dir DIR     with --prompt-file: DIR/N.txt per prompt, streamed\n"
          "                       (DIR must exist);\n"
          "                       every N.txt is checked before the model loads (none\n"
          "                       may be a symbolic link, which is not followed, or a\n"
          "                       directory, and each must be creatable)\n"
          "  --groups G           pipeline groups, 1..8 (default 1; with --prompt-file):\n"
          "                       the --parallel sequences in G groups whose decode steps\n"
          "                       overlap on the stages (group 2 at stage 1 while group 1\n"
          "                       is at stage 2)\n"
          "  --chat               the prompt (each line of --prompt-file) is a user's\n"
          "                       message: laid out with the model's chat template\n"
          "                       (tokenizer.chat_template recognized as chatml, llama3,\n"
          "                       llama2, phi3, gemma or a Mistral one), ending where\n"
          "                       the assistant's reply begins; only the template's\n"
          "                       own markers become control tokens (text in the\n"
          "                       message stays text)\n"
          "  --system TEXT        with --chat: the system prompt (none by default, also\n"
          "                       where the template's Jinja adds one of its own)\n"
          "  --chat-template NAME with --chat: chatml, llama3, llama2, phi3, gemma,\n"
          "                       mistral-v3, mistral-v3-tekken, mistral-v7 or\n"
          "                       mistral-v7-tekken instead of the one the model names\n"
          "  -i, --interactive    with --chat, instead of --prompt: a conversation. Reads\n"
          "                       the user's messages from standard input, one a line\n"
          "                       (\"> \" on stderr asks for one on a terminal), and\n"
          "                       streams each reply (at most -n tokens) on its own\n"
          "                       line; the turns before stay in the KV cache, so only\n"
          "                       a message's own tokens are prefilled; --system is the\n"
          "                       first turn's. Ends with the input (Ctrl-D), exit 0; a\n"
          "                       reply that reaches --ctx is cut, and a message that no\n"
          "                       longer fits ends it, exit 1. Not with --stats\n"
          "  --keepalive S        with --interactive: while waiting for a message, a\n"
          "                       no-op request to every server each S seconds, 1..86400\n"
          "                       (default 30), so that its idle timeout (batond's\n"
          "                       idle_timeout, default 300 s) does not close the\n"
          "                       connection\n"
          "  --servers LIST       host:port,host:port,... or 'local' (default: local);\n"
          "                       host:port@peerhost:peerport also names the address the\n"
          "                       other servers reach that one at (direct path)\n"
          "  --split P1,P2,...    layer proportions per server (default: equal);\n"
          "                       with --servers local, one in-process stage per part\n"
          "  -n N                 tokens to generate (default 64; stops at EOS)\n"
          "  --ctx N              KV cache positions, at least the prompt's tokens + -n\n"
          "                       (default 512)\n"
          "  --ubatch N           prompt tokens per prefill step (default 512 on one\n"
          "                       stage or with --pipeline off; else the prompt's\n"
          "                       tokens / (4 x stages), 32..512, so that stages\n"
          "                       overlap; never more than the prompt)\n"
          "  --pipeline on|off    overlap the stages (default on): stage 1 computes\n"
          "                       ubatch k+1 while stage 2 computes ubatch k, and\n"
          "                       hand-offs go without the coordinator waiting; off: one\n"
          "                       stage at a time (for A/B)\n"
          "  --slots N            input slots per stage boundary, 1..4 (default 2): how\n"
          "                       far one stage may run ahead of the next\n"
          "  --kv-type f32|f16    KV cache element type (default f32); f16 halves the\n"
          "                       cache's memory and what attention reads per token\n"
          "                       (k and v rounded to binary16, as llama.cpp's default\n"
          "                       f16 cache), so outputs can differ slightly from f32\n"
          "  --ring on|off        the decode ring (default on): with the direct path, the\n"
          "                       last stage hands each step's tokens (greedy or sampled,\n"
          "                       one per sequence) straight to stage 1 and the\n"
          "                       coordinator queues the next steps ahead; not with\n"
          "                       --continuous on, --report-gap or --logits-out;\n"
          "                       --groups needs --slots as large; off: every token\n"
          "                       through this process\n"
          "  --temp T             sampling temperature, 0..100 (default 0: greedy)\n"
          "  --top-k K            keep the K most likely tokens (default 0: all)\n"
          "  --top-p P            nucleus sampling mass in (0, 1] (default 1); T and P\n"
          "                       are plain decimals (0.8, 8e-1; no hex floats)\n"
          "  --seed S             sampling seed (default 0); the last stage samples, with\n"
          "                       the token's position as the counter, so a seed gives\n"
          "                       the same ids whatever the split or the batch\n"
          "  --threads N          compute threads of in-process stages, 1..64 (default 1)\n"
          "  --timeout MS         deadline of every server call (default 30000)\n"
          "  --key FILE           client key (baton keygen) for servers started with\n"
          "                       batond --key; with --servers local the in-process\n"
          "                       stages authenticate too\n"
          "  --p2p on|off         hand hidden states directly from server to server where\n"
          "                       both ends support it (default on), or always through\n"
          "                       this process (off: the hub path)\n"
          "  --stats              print per-step command and byte statistics\n"
          "  --stats-json FILE    write the same statistics as JSON\n"
          "  --ids-file FILE      write prompt and generated token ids as JSON\n"
          "  --quiet              do not stream the generated text\n"
          "  --ignore-eos         keep generating after an end-of-generation token\n"
          "  --logits-out FILE    write the logits of every step to FILE (n_vocab\n"
          "                       little-endian binary32 per generated token: step 0\n"
          "                       after the prompt, step s after the s-th generated\n"
          "                       token), for comparisons (tests/reference); not with\n"
          "                       --prompt-file; turns the decode ring off\n"
          "  --report-gap         also record in the --ids-file the smallest gap between\n"
          "                       the two largest logits over the run (near-tie check;\n"
          "                       needs --ids-file)\n"
          "  --help               this text\n"
          "\n"
          "Environment: BATON_SERVERS is used when --servers is not given, BATON_KEY_FILE\n"
          "when --key is not given; BATON_P2P=0 (or off) is --p2p off unless --p2p is\n"
          "given; BATON_CPU_ISA=scalar|avx2|avx512 lowers the in-process kernels' level\n"
          "(same results at every level).\n"
          "Output: the prompt and generated text on stdout; the model, plan, upload,\n"
          "summary and --stats lines and every error on stderr.\n"
          "Exit status: 0 success, 1 failure (the message names the stage and endpoint,\n"
          "or the file: a key file that cannot be used, or a --stats-json, --ids-file or\n"
          "--logits-out that cannot be created, is reported before the model is loaded),\n"
          "2 usage error (a malformed --servers entry, or a --split that does not match\n"
          "the server count, is also found before that).\n",
          f);
}

#define PROG "baton run"

static void serve_usage(FILE *f)
{
    fputs("usage: baton serve --model FILE [--servers LIST] [--listen HOST:PORT] [options]\n"
          "\n"
          "Serves a GGUF model (llama, qwen2, qwen3 or gemma3), its layers split across\n"
          "batond servers (or in-process stages) as with baton run, over HTTP: OpenAI-style\n"
          "completion and chat completion requests, streamed (server-sent events) or\n"
          "not. Each request is a sequence in one of --parallel KV-cache slots; a request\n"
          "that finds no free slot waits in a queue, and one admitted while others decode\n"
          "rides in their decode steps (continuous batching).\n"
          "\n"
          "  POST /v1/completions       {\"prompt\": TEXT, \"max_tokens\": N, \"temperature\": T,\n"
          "                             \"top_p\": P, \"top_k\": K, \"seed\": S, \"stream\": B,\n"
          "                             \"stop\": [up to 4 strings]}: the reply ends before\n"
          "                             the first stop string it holds\n"
          "  POST /v1/chat/completions  {\"messages\": [{\"role\": \"system\"|\"user\"|\n"
          "                             \"assistant\", \"content\": TEXT}, ...], ...}: laid out\n"
          "                             with the model's chat template (as baton run\n"
          "                             --chat)\n"
          "  POST /tokenize             {\"content\": TEXT, \"add_special\": B,\n"
          "                             \"parse_special\": B, \"with_pieces\": B}: the ids\n"
          "                             (llama-server's; nothing is computed)\n"
          "  POST /detokenize           {\"tokens\": [ids]}: {\"content\": TEXT}\n"
          "  GET /health                {\"status\": \"ok\", \"slots\": N, \"running\": R,\n"
          "                             \"queued\": Q}\n"
          "  GET /v1/models             the model (its file's name)\n"
          "\n"
          "  -m, --model FILE     GGUF model (architecture llama, qwen2, qwen3 or gemma3)\n"
          "  --listen HOST:PORT   where to listen (default 127.0.0.1:8080; [IPV6]:PORT;\n"
          "                       port 0: a free one, which the log line names)\n"
          "  --host HOST          as --listen HOST:PORT in two halves (llama-server's\n"
          "  --port PORT          names; either alone keeps the other half of the default)\n"
          "  --port-file FILE     write the port listened on to FILE once listening\n"
          "  --api-key-file FILE  every request but GET /health must carry the key on\n"
          "                       FILE's first line: \"Authorization: Bearer KEY\"\n"
          "                       (else 401); without it anyone who reaches the port\n"
          "                       may use the model\n"
          "  --parallel N         KV-cache slots, sequences decoded together, 1..256\n"
          "                       (default 4)\n"
          "  --queue N            requests that may wait for a free slot, 1..65536\n"
          "                       (default 64); more get 503\n"
          "  --ctx N              KV cache positions per slot: a request's prompt and\n"
          "                       reply (default 512)\n"
          "  -n N                 the most tokens a reply may have, 2.. (default: the\n"
          "                       slot's room); a request's max_tokens is capped by it\n"
          "  --temp T, --top-k K, --top-p P, --seed S\n"
          "                       what a request that does not say gets (default greedy,\n"
          "                       seed 0); the last stage samples with the token's\n"
          "                       position as the counter, so a seed gives the same\n"
          "                       text whatever the split or the other requests\n"
          "  --chat-template NAME chatml, llama3, llama2, phi3, gemma, mistral-v3,\n"
          "                       mistral-v3-tekken, mistral-v7 or mistral-v7-tekken\n"
          "                       instead of the one the model names (without either,\n"
          "                       no chat completions)\n"
          "  --keepalive S        while no request runs, a no-op request to every server\n"
          "                       each S seconds, 1..86400 (default 30), within batond's\n"
          "                       idle_timeout\n"
          "  --prefix-cache on|off  a request goes into the free slot whose cells hold\n"
          "                       the longest prefix of its prompt (a conversation's\n"
          "                       earlier turns, a shared system message), and only the\n"
          "                       rest of the prompt is computed (default on; the reply\n"
          "                       is the same either way); usage.prompt_tokens_details.\n"
          "                       cached_tokens counts what was not computed, and so\n"
          "                       tells how much of a prompt matches what an earlier\n"
          "                       request, any client's, left: off where clients do\n"
          "                       not trust each other\n"
          "  --servers, --split, --key, --p2p, --pipeline, --slots, --kv-type, --groups,\n"
          "  --ubatch, --threads, --timeout, --ignore-eos\n"
          "                       as for baton run (see baton run --help)\n"
          "  --help               this text\n"
          "\n"
          "Environment: BATON_SERVERS, BATON_KEY_FILE and BATON_P2P as for baton run.\n"
          "Output (stderr): the plan, \"serve: listening on http://HOST:PORT\", a line per\n"
          "request that ends, and a summary when SIGINT or SIGTERM stops the server\n"
          "(requests still running then get 503).\n"
          "Exit status: 0 stopped by a signal once listening (before that, SIGINT and\n"
          "SIGTERM end the load as they end baton run: 130, 143), 1 failure (a stage\n"
          "lost, the address in use; the message says which), 2 usage error.\n",
          f);
}

/* The files a run writes besides its text: --ids-file, --stats-json,
 * --logits-out (NULL where not given). */
#define RUN_OUTPUTS 3
static const char *const output_names[RUN_OUTPUTS] = {"--ids-file", "--stats-json",
                                                        "--logits-out"};

/* path's directory, resolved, then "/" and its last component: two paths
 * of one file yet to be created compare equal ("od/1.txt", "./od/1.txt").
 * 0, or -1 when the directory does not resolve (the file cannot be
 * created there either; the output checks say so). */
static int canon_path(const char *path, char *out, size_t cap)
{
    char dir[PATH_MAX], real[PATH_MAX];
    const char *slash = strrchr(path, '/');
    const char *base = slash ? slash + 1 : path;
    const size_t n = slash == NULL ? 0 : slash == path ? 1 : (size_t)(slash - path);

    if (n >= sizeof dir)
        return -1;
    memcpy(dir, slash ? path : ".", slash ? n : 1);
    dir[slash ? n : 1] = '\0';
    if (realpath(dir, real) == NULL)
        return -1;
    return (size_t)snprintf(out, cap, "%s/%s", real, base) < cap ? 0 : -1;
}

/* The path a write to path lands on: a dangling symbolic link (fopen "w"
 * follows it) replaced by its target, relative to the link's directory,
 * at most 8 links deep. Returns out, or path itself when it is no link or
 * the result would not fit. */
static const char *write_target(const char *path, char *out, size_t cap)
{
    char cur[PATH_MAX], link[PATH_MAX];
    struct stat st;

    if ((size_t)snprintf(cur, sizeof cur, "%s", path) >= sizeof cur)
        return path;
    for (int depth = 0; depth < 8 && lstat(cur, &st) == 0 && S_ISLNK(st.st_mode); depth++) {
        const ssize_t n = readlink(cur, link, sizeof link - 1);
        const char *slash = strrchr(cur, '/');

        if (n <= 0)
            break;
        link[n] = '\0';
        if (link[0] == '/' || slash == NULL) {
            memcpy(cur, link, (size_t)n + 1);
        } else {
            char dir_link[PATH_MAX];
            const size_t dn = (size_t)(slash - cur) + 1;

            if (dn + (size_t)n >= sizeof dir_link)
                return path;
            memcpy(dir_link, cur, dn);
            memcpy(dir_link + dn, link, (size_t)n + 1);
            memcpy(cur, dir_link, dn + (size_t)n + 1);
        }
    }
    return (size_t)snprintf(out, cap, "%s", cur) < cap ? out : path;
}

/* Whether writing a and b would write one file: the same regular file
 * where both exist (links included; a terminal, FIFO or device is not
 * overwritten, so /dev/stdout twice is no clash), else the same resolved
 * path (a dangling link by its target), or where a path cannot be
 * resolved (its directory is missing, or longer than PATH_MAX) the same
 * text. */
static int same_target(const char *a, const char *b)
{
    struct stat sa, sb;
    const int ea = stat(a, &sa) == 0, eb = stat(b, &sb) == 0;
    char ta[PATH_MAX], tb[PATH_MAX], ca[PATH_MAX + 256], cb[PATH_MAX + 256];
    const char *wa, *wb;

    if (ea && eb)
        return S_ISREG(sa.st_mode) && sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
    if (ea || eb)
        return 0;
    wa = write_target(a, ta, sizeof ta);
    wb = write_target(b, tb, sizeof tb);
    if (canon_path(wa, ca, sizeof ca) == 0 && canon_path(wb, cb, sizeof cb) == 0)
        return strcmp(ca, cb) == 0;
    return strcmp(wa, wb) == 0;
}

/* The files a run reads: --model, --prompt-file, the client key (--key or
 * BATON_KEY_FILE); path NULL where not given. */
#define RUN_INPUTS 3
struct run_input {
    const char *name, *path;
};

/* Whether path is one of the inputs: 0, or 1 after "PROG: WHAT PATH and
 * INPUT-NAME INPUT are the same file" (an output there would destroy it: a
 * fresh-user walkthrough's --ids-file equal to --key replaced the key). */
static int clashes_input(const char *what, const char *path, const struct run_input *in)
{
    for (int i = 0; i < RUN_INPUTS; i++)
        if (in[i].path && same_target(path, in[i].path)) {
            fprintf(stderr, PROG ": %s %s and %s %s are the same file; write it elsewhere\n",
                    what, path, in[i].name, in[i].path);
            return 1;
        }
    return 0;
}

/* No output of the run may be an input, another output, or one of the
 * files --output-dir will get (DIR/N.txt, N = 1..n_prompts): each would
 * overwrite the other (a break-it review: --ids-file equal to the prompt
 * file replaced it, exit 0). Returns 0, or 1 after a message. */
static int check_output_clashes(const char *const outs[RUN_OUTPUTS], const struct run_input *in,
                                const char *dir, size_t n_prompts)
{
    for (int a = 0; a < RUN_OUTPUTS; a++) {
        if (outs[a] == NULL)
            continue;
        if (in && clashes_input(output_names[a], outs[a], in))
            return 1;
        for (int b = a + 1; b < RUN_OUTPUTS; b++)
            if (outs[b] && same_target(outs[a], outs[b])) {
                fprintf(stderr,
                        PROG ": %s and %s are the same file (%s); one would overwrite the "
                             "other\n",
                        output_names[a], output_names[b], outs[a]);
                return 1;
            }
        if (dir) {
            /* DIR/N.txt for some N in 1..n_prompts: by name in DIR, or by
             * the file it already is */
            char tw[PATH_MAX], path[4096];
            const char *w = write_target(outs[a], tw, sizeof tw);
            const char *slash = strrchr(w, '/');
            const char *base = slash ? slash + 1 : w;
            char *end;
            unsigned long long k = strtoull(base, &end, 10);
            size_t clash = 0;
            struct stat so;
            /* an output that exists already can be DIR/N.txt under another
             * name (a hard link); a new one only by its name, above */
            const int exists = stat(outs[a], &so) == 0;

            if (base[0] >= '1' && base[0] <= '9' && strcmp(end, ".txt") == 0 && k <= n_prompts &&
                (size_t)snprintf(path, sizeof path, "%s/%s", dir, base) < sizeof path &&
                same_target(w, path))
                clash = (size_t)k;
            for (size_t i = 0; exists && clash == 0 && i < n_prompts; i++)
                if ((size_t)snprintf(path, sizeof path, "%s/%zu.txt", dir, i + 1) <
                        sizeof path &&
                    same_target(outs[a], path))
                    clash = i + 1;
            if (clash) {
                fprintf(stderr,
                        PROG ": %s %s is the file --output-dir %s gets for prompt %zu; one "
                             "would overwrite the other\n",
                        output_names[a], outs[a], dir, clash);
                return 1;
            }
        }
    }
    return 0;
}

/* Checks, before the model is loaded, every file the run will write in
 * --output-dir: DIR/N.txt for N = 1..n_prompts (run_parallel.c's
 * open_output opens each with O_NOFOLLOW | O_CREAT | O_TRUNC as its prompt
 * is admitted, so one that cannot be written would otherwise stop the run
 * midway, after the upload and with the files before it cut short). Each
 * must not be a symbolic link (not followed), a directory or an input (the
 * model, the --prompt-file, the client key), and must be creatable
 * (baton_cli_check_output, which leaves nothing behind). Returns 0, or 1
 * after a message naming the file. */
static int check_output_files(const char *dir, size_t n_prompts, const struct run_input *in)
{
    struct stat in_st[RUN_INPUTS];
    int have_in[RUN_INPUTS];

    for (int k = 0; k < RUN_INPUTS; k++)
        have_in[k] = in[k].path != NULL && stat(in[k].path, &in_st[k]) == 0;

    for (size_t i = 0; i < n_prompts; i++) {
        char path[4096];
        struct stat st;

        if ((size_t)snprintf(path, sizeof path, "%s/%zu.txt", dir, i + 1) >= sizeof path) {
            fprintf(stderr, PROG ": --output-dir %s: path too long\n", dir);
            return 1;
        }
        if (lstat(path, &st) == 0 && S_ISLNK(st.st_mode)) {
            fprintf(stderr,
                    PROG ": --output-dir %s: a symbolic link, which is not followed (the "
                         "output files are written only as files of their own); remove it or "
                         "choose another --output-dir\n",
                    path);
            return 1;
        }
        for (int k = 0; k < RUN_INPUTS && stat(path, &st) == 0; k++)
            if (have_in[k] && st.st_dev == in_st[k].st_dev && st.st_ino == in_st[k].st_ino) {
                fprintf(stderr,
                        PROG ": --output-dir %s and %s %s are the same file; write it "
                             "elsewhere\n",
                        path, in[k].name, in[k].path);
                return 1;
            }
        if (baton_cli_check_output(PROG, "--output-dir", path, 0, NULL, "") != 0)
            return 1;
    }
    return 0;
}

/* "baton run" or "baton serve": what messages of the options both take
 * start with */
static const char *prog = PROG;

static int parse_u32(const char *opt, const char *s, uint32_t min, uint32_t max, uint32_t *out)
{
    return baton_cli_parse_u32(prog, opt, s, min, max, out);
}

/* --prompt-ids LIST: decimal ids 0..INT32_MAX separated by commas and/or
 * spaces, at least one. *out (malloc'd, the caller frees) gets *n of them.
 * Returns 0, 1 (out of memory) or 2 after a message naming the bad id. (The
 * ids are checked against the vocabulary once the model is read.) */
static int parse_ids(const char *s, int32_t **out, size_t *n)
{
    const size_t cap = strlen(s) / 2 + 1; /* each id takes a digit and a separator */
    int32_t *ids = calloc(cap, sizeof(*ids));
    size_t k = 0;

    if (ids == NULL) {
        fprintf(stderr, PROG ": out of memory\n");
        return 1;
    }
    while (*s) {
        char *end;
        long v;

        if (*s == ',' || *s == ' ') {
            s++;
            continue;
        }
        errno = 0;
        v = strtol(s, &end, 10);
        if (end == s || *s == '-' || *s == '+' || errno != 0 || v > INT32_MAX ||
            (*end != '\0' && *end != ',' && *end != ' ') || k == cap) {
            fprintf(stderr, PROG ": --prompt-ids: '%s' is not a list of token ids (0, 1, ...)\n",
                    s);
            free(ids);
            return 2;
        }
        ids[k++] = (int32_t)v;
        s = end;
    }
    if (k == 0) {
        fprintf(stderr, PROG ": --prompt-ids: no ids\n");
        free(ids);
        return 2;
    }
    *out = ids;
    *n = k;
    return 0;
}

/* The option that gave serve's address: "--listen", or "--host/--port"
 * when those were composed into it (the messages name what was typed). */
static const char *listen_name = "--listen";

/* baton serve once its options are read: their checks and defaults, then
 * the run. */
static int serve_cmd(struct baton_run_config *cfg, struct baton_serve_config *sv,
                     const char *servers_name, int n_given, int parallel_given)
{
    if (cfg->model_path == NULL) {
        fprintf(stderr, "baton serve: --model FILE is required (see --help)\n");
        return 2;
    }
    if ((cfg->key_name && strcmp(cfg->key_name, "--key") == 0 &&
         baton_cli_empty_output("baton serve", "--key", cfg->key_path)) ||
        baton_cli_empty_output("baton serve", "--model", cfg->model_path) ||
        baton_cli_empty_output("baton serve", "--api-key-file", sv->api_key_path) ||
        baton_cli_empty_output("baton serve", "--listen", sv->listen) ||
        baton_cli_empty_output("baton serve", "--port-file", sv->port_file))
        return 2;
    {
        char err[400];

        if (baton_serve_check_listen(sv->listen, err, sizeof err) != 0) {
            fprintf(stderr, "baton serve: %s %s\n", listen_name, err);
            return 2;
        }
    }
    if (cfg->n_ctx < 2) {
        fprintf(stderr, "baton serve: --ctx %u: a slot needs 2 positions at least (a prompt "
                        "token and a reply)\n",
                cfg->n_ctx);
        return 2;
    }
    if (!parallel_given)
        cfg->n_parallel = 4;
    if (!n_given)
        cfg->n_predict = cfg->n_ctx; /* a reply may fill its slot */
    {
        const int pre = baton_run_precheck(cfg, servers_name);

        if (pre != 0)
            return pre;
    }
    /* the key file found unreadable now, not after the model has loaded */
    if (sv->api_key_path) {
        unsigned char hash[32];
        char err[256];

        if (baton_serve_read_key(sv->api_key_path, hash, err, sizeof err) != 0) {
            fprintf(stderr, "baton serve: --api-key-file %s: %s\n", sv->api_key_path, err);
            return 1;
        }
    }
    sv->max_conns = sv->queue + cfg->n_parallel + 16;
    if (cfg->n_ubatch > cfg->n_ctx)
        cfg->n_ubatch = cfg->n_ctx;
    cfg->serve = sv;
    cfg->quiet = 1;
    return baton_run(cfg);
}

/* baton run (serve 0) or baton serve (1). */
static int run_cmd(int argc, char **argv, int serve)
{
    enum {
        O_MODEL = 256, O_PROMPT, O_SERVERS, O_SPLIT, O_CTX, O_UBATCH, O_TEMP, O_TOPK, O_TOPP,
        O_SEED, O_THREADS, O_TIMEOUT, O_STATS, O_IDS, O_QUIET, O_IGNORE_EOS, O_GAP, O_HELP,
        O_KEY, O_P2P, O_STATS_JSON, O_PIPELINE, O_SLOTS, O_RING, O_PROMPT_FILE, O_PARALLEL, O_CONTINUOUS,
        O_OUTPUT_DIR, O_GROUPS, O_PROMPT_IDS, O_LOGITS_OUT, O_KV_TYPE, O_CHAT, O_SYSTEM,
        O_CHAT_TEMPLATE, O_INTERACTIVE, O_KEEPALIVE, O_LISTEN, O_API_KEY_FILE, O_QUEUE,
        O_PORT_FILE, O_PREFIX_CACHE, O_HOST, O_PORT
    };
    static const struct option opts[] = {
        {"model", required_argument, 0, O_MODEL},     {"prompt", required_argument, 0, O_PROMPT},
        {"servers", required_argument, 0, O_SERVERS}, {"split", required_argument, 0, O_SPLIT},
        {"ctx", required_argument, 0, O_CTX},         {"ubatch", required_argument, 0, O_UBATCH},
        {"temp", required_argument, 0, O_TEMP},       {"top-k", required_argument, 0, O_TOPK},
        {"top-p", required_argument, 0, O_TOPP},      {"seed", required_argument, 0, O_SEED},
        {"threads", required_argument, 0, O_THREADS}, {"timeout", required_argument, 0, O_TIMEOUT},
        {"stats", no_argument, 0, O_STATS},           {"ids-file", required_argument, 0, O_IDS},
        {"quiet", no_argument, 0, O_QUIET},           {"help", no_argument, 0, O_HELP},
        {"ignore-eos", no_argument, 0, O_IGNORE_EOS}, {"report-gap", no_argument, 0, O_GAP},
        {"key", required_argument, 0, O_KEY},
        {"p2p", required_argument, 0, O_P2P},         {"stats-json", required_argument, 0, O_STATS_JSON},
        {"pipeline", required_argument, 0, O_PIPELINE}, {"slots", required_argument, 0, O_SLOTS},
        {"ring", required_argument, 0, O_RING},
        {"continuous", required_argument, 0, O_CONTINUOUS},
        {"prompt-file", required_argument, 0, O_PROMPT_FILE},
        {"parallel", required_argument, 0, O_PARALLEL},
        {"output-dir", required_argument, 0, O_OUTPUT_DIR},
        {"groups", required_argument, 0, O_GROUPS},
        {"prompt-ids", required_argument, 0, O_PROMPT_IDS},
        {"logits-out", required_argument, 0, O_LOGITS_OUT},
        {"kv-type", required_argument, 0, O_KV_TYPE},
        {"chat", no_argument, 0, O_CHAT},
        {"system", required_argument, 0, O_SYSTEM},
        {"chat-template", required_argument, 0, O_CHAT_TEMPLATE},
        {"interactive", no_argument, 0, O_INTERACTIVE},
        {"keepalive", required_argument, 0, O_KEEPALIVE},
        {"listen", required_argument, 0, O_LISTEN},
        {"api-key-file", required_argument, 0, O_API_KEY_FILE},
        {"queue", required_argument, 0, O_QUEUE},
        {"port-file", required_argument, 0, O_PORT_FILE},
        /* llama-server's names; "--port" would otherwise abbreviate
         * --port-file and write the port number as a file name */
        {"host", required_argument, 0, O_HOST},
        {"port", required_argument, 0, O_PORT},
        {"prefix-cache", required_argument, 0, O_PREFIX_CACHE},
        {0, 0, 0, 0}};
    struct baton_run_config cfg;
    const char *servers_name = "--servers"; /* where cfg.servers came from */
    const char *prompt_file = NULL, *prompt_ids_arg = NULL;
    int32_t *prompt_ids = NULL;
    struct baton_cli_lines lines = {0};
    uint32_t u;
    int c, rc, top_k_given = 0, top_p_given = 0, seed_given = 0, continuous_given = 0;
    int interactive = 0, keepalive_given = 0, n_given = 0, parallel_given = 0;
    /* options baton run takes and baton serve does not: the first given */
    const char *run_only = NULL, *serve_only = NULL;
    const char *host_arg = NULL, *port_arg = NULL;
    uint32_t port_val = 0;
    int listen_given = 0;
    char listen_buf[300];
    struct baton_serve_config sv = {"127.0.0.1:8080", NULL, NULL, 64, 0, 1};

    prog = serve ? "baton serve" : PROG;
    baton_run_config_default(&cfg);
    cfg.prog = prog;
    baton_run_config_env(&cfg, &servers_name);
    if (getenv("BATON_P2P") && *getenv("BATON_P2P")) {
        const char *v = getenv("BATON_P2P");

        if (!strcmp(v, "0") || !strcmp(v, "off")) {
            cfg.p2p = 0;
            cfg.p2p_off_name = !strcmp(v, "0") ? "BATON_P2P=0" : "BATON_P2P=off";
        } else if (!strcmp(v, "1") || !strcmp(v, "on"))
            cfg.p2p = 1;
        else {
            fprintf(stderr, "%s: BATON_P2P: '%s' is not 0, 1, on or off\n", prog, v);
            return 2;
        }
    }
    optind = 1;
    while ((c = getopt_long(argc, argv, "m:n:p:hi", opts, NULL)) != -1) {
        switch (c) {
        case 'm': /* llama.cpp's short form, as baton tokenize takes it */
        case O_MODEL: cfg.model_path = optarg; break;
        case 'p': /* llama.cpp's llama-cli short form */
        case O_PROMPT: cfg.prompt = optarg; run_only = run_only ? run_only : "--prompt"; break;
        case O_SERVERS: cfg.servers = optarg; servers_name = "--servers"; break;
        case O_SPLIT: cfg.split = optarg; break;
        case 'n':
            if (parse_u32("-n", optarg, serve ? 2 : 1, UINT32_MAX, &cfg.n_predict)) return 2;
            n_given = 1;
            break;
        case O_CTX:
            if (parse_u32("--ctx", optarg, 1, UINT32_MAX, &cfg.n_ctx)) return 2;
            cfg.ctx_origin = BATON_CTX_GIVEN;
            break;
        case O_UBATCH:
            if (parse_u32("--ubatch", optarg, 1, UINT32_MAX, &cfg.n_ubatch)) return 2;
            break;
        case O_TEMP:
            if (baton_cli_parse_float(prog, "--temp", optarg, 0.0, 100.0, 0, &cfg.temp)) return 2;
            break;
        case O_TOPK:
            if (parse_u32("--top-k", optarg, 0, UINT32_MAX, &cfg.top_k)) return 2;
            top_k_given = 1;
            break;
        case O_TOPP:
            if (baton_cli_parse_float(prog, "--top-p", optarg, 0.0, 1.0, 1, &cfg.top_p)) return 2;
            top_p_given = 1;
            break;
        case O_SEED:
            if (baton_cli_parse_u64(prog, "--seed", optarg, 0, UINT64_MAX, &cfg.seed)) return 2;
            seed_given = 1;
            break;
        case O_THREADS:
            if (parse_u32("--threads", optarg, 1, BATON_POOL_MAX_THREADS, &cfg.n_threads))
                return 2;
            break;
        case O_TIMEOUT:
            if (parse_u32("--timeout", optarg, 1, 86400000u, &u)) return 2;
            cfg.timeout_ms = (int)u;
            break;
        case O_STATS: cfg.stats = 1; run_only = run_only ? run_only : "--stats"; break;
        case O_IDS: cfg.ids_path = optarg; run_only = run_only ? run_only : "--ids-file"; break;
        case O_QUIET: cfg.quiet = 1; run_only = run_only ? run_only : "--quiet"; break;
        case O_IGNORE_EOS: cfg.ignore_eos = 1; break;
        case O_GAP: cfg.report_gap = 1; run_only = run_only ? run_only : "--report-gap"; break;
        case O_KEY: cfg.key_path = optarg; cfg.key_name = "--key"; break;
        case O_P2P:
            if (baton_cli_parse_onoff(prog, "--p2p", optarg, &cfg.p2p))
                return 2;
            cfg.p2p_off_name = NULL;
            break;
        case O_PIPELINE:
            if (baton_cli_parse_onoff(prog, "--pipeline", optarg, &cfg.pipeline)) return 2;
            break;
        case O_RING:
            if (baton_cli_parse_onoff(prog, "--ring", optarg, &cfg.ring)) return 2;
            run_only = run_only ? run_only : "--ring"; /* a server's steps take prompts */
            break;
        case O_CONTINUOUS:
            if (baton_cli_parse_onoff(prog, "--continuous", optarg, &cfg.continuous)) return 2;
            continuous_given = 1;
            run_only = run_only ? run_only : "--continuous";
            break;
        case O_KV_TYPE:
            if (baton_cli_parse_kv_type(prog, "--kv-type", optarg, &cfg.kv_type)) return 2;
            break;
        case O_SLOTS:
            if (parse_u32("--slots", optarg, 1, BATON_LLAMA_MAX_SLOTS, &cfg.n_slots)) return 2;
            break;
        case O_STATS_JSON:
            cfg.stats_json = optarg;
            run_only = run_only ? run_only : "--stats-json";
            break;
        case O_PROMPT_FILE:
            prompt_file = optarg;
            run_only = run_only ? run_only : "--prompt-file";
            break;
        case O_PARALLEL:
            if (parse_u32("--parallel", optarg, 1, 256, &cfg.n_parallel)) return 2;
            parallel_given = 1;
            break;
        case O_OUTPUT_DIR:
            cfg.output_dir = optarg;
            run_only = run_only ? run_only : "--output-dir";
            break;
        case O_PROMPT_IDS:
            prompt_ids_arg = optarg;
            run_only = run_only ? run_only : "--prompt-ids";
            break;
        case O_LOGITS_OUT:
            cfg.logits_path = optarg;
            run_only = run_only ? run_only : "--logits-out";
            break;
        case O_GROUPS:
            if (parse_u32("--groups", optarg, 1, 8, &cfg.n_groups)) return 2;
            break;
        case O_CHAT: cfg.chat = 1; run_only = run_only ? run_only : "--chat"; break;
        case 'i':
        case O_INTERACTIVE:
            interactive = 1;
            run_only = run_only ? run_only : "--interactive";
            break;
        case O_KEEPALIVE:
            if (parse_u32("--keepalive", optarg, 1, 86400, &cfg.keepalive_s)) return 2;
            keepalive_given = 1;
            break;
        case O_SYSTEM:
            cfg.chat_system = optarg;
            run_only = run_only ? run_only : "--system";
            break;
        case O_CHAT_TEMPLATE:
            if (baton_chat_from_name(optarg) == BATON_CHAT_UNKNOWN) {
                char shown[64];

                fprintf(stderr, "%s: --chat-template '%s' is not " BATON_CHAT_NAMES "\n", prog,
                        baton_gguf_escape(shown, sizeof shown, optarg, strlen(optarg)));
                return 2;
            }
            cfg.chat_template = optarg;
            break;
        case O_LISTEN:
            sv.listen = optarg;
            listen_given = 1;
            serve_only = serve_only ? serve_only : "--listen";
            break;
        case O_API_KEY_FILE:
            sv.api_key_path = optarg;
            serve_only = serve_only ? serve_only : "--api-key-file";
            break;
        case O_PORT_FILE:
            sv.port_file = optarg;
            serve_only = serve_only ? serve_only : "--port-file";
            break;
        case O_HOST:
        case O_PORT:
            if (c == O_HOST)
                host_arg = optarg;
            else if (parse_u32("--port", optarg, 0, 65535, &port_val))
                return 2;
            else
                port_arg = optarg;
            serve_only = serve_only ? serve_only : c == O_HOST ? "--host" : "--port";
            break;
        case O_QUEUE:
            if (parse_u32("--queue", optarg, 1, 65536, &sv.queue)) return 2;
            serve_only = serve_only ? serve_only : "--queue";
            break;
        case O_PREFIX_CACHE:
            if (baton_cli_parse_onoff(prog, "--prefix-cache", optarg, &sv.prefix_cache)) return 2;
            serve_only = serve_only ? serve_only : "--prefix-cache";
            break;
        case 'h':
        case O_HELP:
            if (serve)
                serve_usage(stdout);
            else
                run_usage(stdout);
            return 0;
        default:
            fprintf(stderr, "(see `%s --help`)\n", prog);
            return 2;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "%s: unexpected argument '%s' (see --help)\n", prog, argv[optind]);
        return 2;
    }
    if (serve && run_only) {
        fprintf(stderr, "baton serve: %s is an option of baton run, not of baton serve: a "
                        "server's prompts and chat messages come in its requests, and its "
                        "output goes to them (see --help)\n",
                run_only);
        return 2;
    }
    if (!serve && serve_only) {
        fprintf(stderr, "baton run: %s is baton serve's (an HTTP server)\n", serve_only);
        return 2;
    }
    if (serve && (host_arg || port_arg)) {
        /* --host H --port P: --listen H:P ([H]:P for an IPv6 address);
         * either alone keeps the other half of the default 127.0.0.1:8080 */
        const char *h = host_arg ? host_arg : "127.0.0.1";
        const int v6 = strchr(h, ':') != NULL && h[0] != '[';
        struct in6_addr a6;

        if (listen_given) {
            fprintf(stderr, "baton serve: give --listen HOST:PORT or --host / --port, not both\n");
            return 2;
        }
        if (host_arg && host_arg[0] == '\0') {
            fprintf(stderr, "baton serve: --host: empty (a host name or address)\n");
            return 2;
        }
        /* a ':' makes it an IPv6 address (a host name has none): "host:port"
         * would otherwise become "[host:port]:8080" */
        if (v6 && inet_pton(AF_INET6, h, &a6) != 1) {
            fprintf(stderr, "baton serve: --host %s: not a host name or an IPv6 address (the "
                            "port goes to --port)\n", h);
            return 2;
        }
        listen_name = "--host/--port";
        if (snprintf(listen_buf, sizeof listen_buf, "%s%s%s:%u", v6 ? "[" : "", h, v6 ? "]" : "",
                     port_arg ? port_val : 8080u) >=
            (int)sizeof listen_buf) {
            fprintf(stderr, "baton serve: --host: too long\n");
            return 2;
        }
        sv.listen = listen_buf;
    }
    if (serve)
        return serve_cmd(&cfg, &sv, servers_name, n_given, parallel_given);
    if (cfg.prompt && prompt_file) {
        fprintf(stderr, "baton run: give only one of --prompt TEXT and --prompt-file FILE\n");
        return 2;
    }
    if (prompt_ids_arg && (cfg.prompt || prompt_file)) {
        fprintf(stderr, "baton run: give only one of --prompt-ids LIST and %s\n",
                cfg.prompt ? "--prompt TEXT" : "--prompt-file FILE");
        return 2;
    }
    if (interactive && !cfg.chat) {
        fprintf(stderr, "baton run: --interactive is a conversation with a chat model: it "
                        "needs --chat\n");
        return 2;
    }
    if (interactive && (cfg.prompt || prompt_file || prompt_ids_arg)) {
        fprintf(stderr, "baton run: --interactive reads the messages from standard input: not "
                        "with %s\n",
                cfg.prompt ? "--prompt" : prompt_file ? "--prompt-file" : "--prompt-ids");
        return 2;
    }
    if (interactive && (cfg.logits_path || cfg.report_gap)) {
        fprintf(stderr, "baton run: %s: not with --interactive\n",
                cfg.logits_path ? "--logits-out" : "--report-gap");
        return 2;
    }
    if (interactive && (cfg.stats || cfg.stats_json)) {
        fprintf(stderr, "baton run: %s: its figures are per decode step of one run of prompts, "
                        "and a conversation prefills between its decode steps: not with "
                        "--interactive\n",
                cfg.stats ? "--stats" : "--stats-json");
        return 2;
    }
    if (keepalive_given && !interactive) {
        fprintf(stderr, "baton run: --keepalive needs --interactive\n");
        return 2;
    }
    if (interactive)
        cfg.chat_fd = STDIN_FILENO;
    if (cfg.model_path == NULL ||
        (cfg.prompt == NULL && prompt_file == NULL && prompt_ids_arg == NULL && !interactive)) {
        fprintf(stderr, "baton run: --model FILE and one of --prompt TEXT, --prompt-ids LIST, "
                        "--prompt-file FILE or --chat --interactive are required (see --help)\n");
        return 2;
    }
    if ((cfg.chat_system || cfg.chat_template) && !cfg.chat) {
        fprintf(stderr, "baton run: %s needs --chat\n",
                cfg.chat_system ? "--system" : "--chat-template");
        return 2;
    }
    if (cfg.chat && prompt_ids_arg) {
        fprintf(stderr, "baton run: --chat lays out text: give --prompt TEXT or --prompt-file "
                        "FILE, not --prompt-ids\n");
        return 2;
    }
    /* an empty --key (--key "$UNSET") is not "no key": a usage error, as in
     * batond (an empty BATON_KEY_FILE still means none) */
    if (cfg.key_name && strcmp(cfg.key_name, "--key") == 0 &&
        baton_cli_empty_output("baton run", "--key", cfg.key_path))
        return 2;
    if (baton_cli_empty_output("baton run", "--model", cfg.model_path))
        return 2; /* it was "baton run: : cannot open" */
    if (baton_cli_empty_output("baton run", "--stats-json", cfg.stats_json) ||
        baton_cli_empty_output("baton run", "--ids-file", cfg.ids_path) ||
        baton_cli_empty_output("baton run", "--logits-out", cfg.logits_path) ||
        baton_cli_empty_output("baton run", "--output-dir", cfg.output_dir))
        return 2;
    if (cfg.logits_path && prompt_file) {
        fprintf(stderr, "baton run: --logits-out writes the logits of one sequence: not with "
                        "--prompt-file\n");
        return 2;
    }

    if (cfg.temp <= 0.0f && (top_k_given || top_p_given || seed_given))
        fprintf(stderr, "baton run: note: %s takes effect only with --temp above 0 (this run "
                        "decodes greedily)\n",
                top_k_given ? "--top-k" : top_p_given ? "--top-p" : "--seed");
    if (prompt_file == NULL &&
        (cfg.n_parallel > 1 || cfg.output_dir || cfg.n_groups > 1 || continuous_given)) {
        fprintf(stderr, "baton run: %s needs --prompt-file FILE\n",
                cfg.n_parallel > 1 ? "--parallel"
                : cfg.output_dir   ? "--output-dir"
                : cfg.n_groups > 1 ? "--groups"
                                   : "--continuous");
        return 2;
    }
    if (cfg.report_gap && cfg.ids_path == NULL) {
        fprintf(stderr, "baton run: --report-gap needs --ids-file FILE (the gap is written "
                        "there)\n");
        return 2;
    }
    /* the endpoint list and the key file: a typo is found now, not after the
     * model has loaded */
    {
        const int pre = baton_run_precheck(&cfg, servers_name);

        if (pre != 0)
            return pre;
    }
    /* one output for another or for an input (the output dir's files once
     * the prompts are counted, below); then each found unwritable now, not
     * after the whole generation */
    const struct run_input inputs[RUN_INPUTS] = {
        {"--model", cfg.model_path},
        {"--prompt-file", prompt_file},
        {cfg.key_name ? cfg.key_name : "--key", cfg.key_path}};
    const char *const outputs[RUN_OUTPUTS] = {cfg.ids_path, cfg.stats_json, cfg.logits_path};

    if (check_output_clashes(outputs, inputs, NULL, 0) != 0)
        return 1;
    for (int o = 0; o < RUN_OUTPUTS; o++)
        if (outputs[o] &&
            baton_cli_check_output(PROG, output_names[o], outputs[o], 0, NULL, "") != 0)
            return 1;
    if (cfg.n_ubatch > cfg.n_ctx)
        cfg.n_ubatch = cfg.n_ctx;
    if (prompt_file) {
        struct stat sb;

        if (cfg.output_dir && stat(cfg.output_dir, &sb) != 0) {
            const int e = errno;

            fprintf(stderr, "baton run: --output-dir %s: %s%s\n", cfg.output_dir, strerror(e),
                    e == ENOENT ? " (create the directory first: mkdir -p)" : "");
            return 1;
        }
        if (cfg.output_dir && !S_ISDIR(sb.st_mode)) {
            fprintf(stderr, "baton run: --output-dir %s: not a directory\n", cfg.output_dir);
            return 1;
        }
        rc = baton_cli_read_lines(PROG, "--prompt-file", prompt_file, &lines);
        if (rc != 0)
            return rc;
        cfg.prompts = (const char *const *)lines.line;
        cfg.n_prompts = lines.n;
        /* every output file, found unwritable now, not after the model has
         * loaded and some of them are written */
        if (cfg.output_dir &&
            (check_output_files(cfg.output_dir, lines.n, inputs) != 0 ||
             check_output_clashes(outputs, NULL, cfg.output_dir, lines.n) != 0)) {
            baton_cli_lines_free(&lines);
            return 1;
        }
    }
    if (prompt_ids_arg) {
        rc = parse_ids(prompt_ids_arg, &prompt_ids, &cfg.n_prompt_ids);
        if (rc != 0)
            return rc;
        cfg.prompt_ids = prompt_ids;
        cfg.prompt = "";
    }
    rc = baton_run(&cfg);
    baton_cli_lines_free(&lines);
    free(prompt_ids);
    return rc;
}

int baton_cmd_run(int argc, char **argv)
{
    return run_cmd(argc, argv, 0);
}

int baton_cmd_serve(int argc, char **argv)
{
    return run_cmd(argc, argv, 1);
}
