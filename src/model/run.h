/* The coordinator: `baton run` loads a llama GGUF, places its layers on the
 * stage servers, and generates text (run_internal.h lists the parts).
 *
 * Each stage's graphs are registered once (GRAPH_REGISTER) for the step
 * shapes of the run and every input slot; a step is one GRAPH_RUN per stage
 * (positions and a decode token as inputs, the argmax returned by the last
 * stage), pipelined on every connection, and the step engine
 * (run_engine.c) sends each stage's part as soon as its input can exist.
 *
 * Hub path: each next stage gets the previous stage's hidden state through
 * the coordinator (GET_TENSOR, SET_TENSOR). Direct path (docs/PROTOCOL.md
 * "Direct path", "Asynchronous hand-off"): when both ends of a boundary
 * advertise BATON_FEATURE_PEER_COPY (and p2p is on), the coordinator grants
 * each input slot of stage i+1 once (GRANT_WRITE) and registers a route to
 * it on stage i (COPY_ROUTE); stage i's run hands its hidden state off
 * itself, with a sequence number, and stage i+1's run is fenced on it. A
 * hand-off that does not land makes the fenced run fail (nothing computed)
 * and the step is redone through the hub path, so the output is identical
 * on both paths. The decode ring (cfg->ring): the last stage also hands
 * each decode step's tokens (one per sequence) to stage 1's token input,
 * whose run of the step that takes them is fenced on it, and the
 * coordinator queues the decode steps ahead.
 */
#ifndef BATON_MODEL_RUN_H
#define BATON_MODEL_RUN_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "baton/client.h"
#include "model/split.h"

/* Measurements of one run (for `baton bench`). Statistics cover the decode
 * window: every step after the first generated token. */
struct baton_run_result {
    size_t n_prompt, n_gen;
    double t_load_s;    /* open, plan, connect, upload */
    double t_prefill_s; /* prompt through every stage, first token out (TTFT) */
    double t_decode_s;  /* the remaining n_gen - 1 steps */
    uint32_t n_stages;
    uint32_t decode_steps;
    struct baton_cmd_stats cmd[BATON_MAX_STAGES][BATON_CMD_LIMIT]; /* summed over decode steps */
    uint64_t hidden_bytes_hub; /* hidden-state bytes through the coordinator, decode window */
    uint64_t token_bytes;      /* token ids, positions, last index, argmax, decode window */
    uint64_t logits_bytes;     /* logits fetched, decode window */
    uint64_t waits;            /* times the coordinator blocked for a reply it needed */
    uint64_t redos;            /* steps redone through the hub after a failed hand-off */
    uint32_t n_ubatch;         /* prompt tokens per prefill step, as run */
    uint32_t n_seq;            /* sequences decoded together (several sequences; else 0) */
    /* Direct path, decode window, per stage: */
    uint32_t n_direct;                            /* boundaries with the direct path set up */
    int ring;                /* a token went around the ring (last stage -> stage 1);
                                0 when it was off or every hand-off fell back */
    uint64_t copies_done[BATON_MAX_STAGES];       /* COPY_TENSOR_TO replies "done" */
    uint64_t copies_not_done[BATON_MAX_STAGES];   /* ... "not done": copied via the hub */
    uint64_t hidden_gets[BATON_MAX_STAGES];       /* hub: hidden-state GET_TENSOR */
    uint64_t hidden_sets[BATON_MAX_STAGES];       /* hub: hidden-state SET_TENSOR */
    int peer_stats_ok[BATON_MAX_STAGES];          /* the server answered the counter query */
    uint64_t peer_bytes_sent[BATON_MAX_STAGES];   /* this session's, counted by the server */
    uint64_t peer_bytes_received[BATON_MAX_STAGES];
};

/* Where baton_run_config.n_ctx came from, so that a message about the
 * context names what the user typed (or did not type). */
enum baton_ctx_origin {
    BATON_CTX_GIVEN = 0, /* --ctx N: "--ctx N" */
    BATON_CTX_DEFAULT,   /* baton run's default: "the default --ctx N" */
    BATON_CTX_BENCH,     /* baton bench without --ctx, from -p (n_prompt_ids) and -n
                            (n_predict): "-p A + -n B (a KV cache of N positions)" */
};

/* `baton serve` (src/model/serve.c): the coordinator as an HTTP server
 * whose requests are the sequences (docs/USAGE.md, "An HTTP server"). */
struct baton_serve_config {
    const char *listen;       /* "host:port" or "[v6]:port"; port 0: a free one (the log
                                 line "serve: listening on http://HOST:PORT" names it) */
    const char *api_key_path; /* a file whose first line is the key every request but
                                 GET /health must carry ("Authorization: Bearer KEY");
                                 NULL: none */
    const char *port_file;    /* when set, the port listened on is written there (a
                                 line; to a temporary file renamed over it), as batond
                                 --port-file does */
    uint32_t queue;           /* requests that may wait for a free slot; more get 503 */
    uint32_t max_conns;       /* HTTP connections at once */
    int prefix_cache;         /* a request goes into the free slot whose cells hold the
                                 longest prefix of its prompt, and only the rest is
                                 computed (run_parallel.c); 0: every prompt whole */
};

struct baton_run_config {
    const char *model_path;
    const char *servers;  /* "host:port,host:port" or "local"; an entry may add a
                             peer-facing address: "host:port@peerhost:peerport" */
    const char *split;    /* proportions, e.g. "1,1,1"; NULL = one part per server */
    const char *prompt;
    uint32_t n_predict;   /* tokens to generate (stops earlier at EOS) */
    uint32_t n_ctx;       /* KV cache positions */
    enum baton_ctx_origin ctx_origin; /* where n_ctx came from, for messages
                                         (baton_run_config_default: BATON_CTX_DEFAULT,
                                         with n_ctx 512); set it with n_ctx */
    uint32_t n_ubatch;    /* prompt tokens per prefill step (1 = token by token; 0 =
                             baton_run_default_ubatch) */
    int pipeline;         /* 1 (default): stages overlap (pipelined prefill, asynchronous
                             hand-offs); 0: one stage at a time (A/B) */
    uint32_t n_slots;     /* boundary input slots per stage, 1..4 (default 2) */
    uint32_t kv_type;     /* KV cache element type: BATON_TYPE_F32 (default) or
                             BATON_TYPE_F16 (half the cache's memory and the
                             bytes attention reads; k and v rounded to binary16
                             when written, as llama.cpp's default f16 cache) */
    float temp;           /* 0 = greedy (argmax on the last stage) */
    uint32_t top_k;
    float top_p;
    uint64_t seed;
    uint32_t n_threads;   /* compute threads of in-process stages */
    int timeout_ms;       /* deadline of every call to a server */
    int stats;            /* print per-step command/byte statistics */
    const char *stats_json; /* when set, write the same statistics as JSON */
    int p2p;              /* 1 (default): direct path where both ends support it;
                             0: hub path only */
    const char *p2p_off_name; /* what set p2p 0, for the plan lines: NULL means
                                 "--p2p off"; baton run sets "BATON_P2P=VALUE"
                                 when the environment did */
    int ring;             /* 1 (default): the decode ring where it can be used (direct
                             path to stage 1): the last stage hands each step's tokens
                             straight to stage 1; 0: every token through the coordinator */
    int continuous;       /* 1: with several sequences, a prompt admitted into a
                             freed slot rides in the decode steps (n_ubatch tokens
                             of it a step, beside the other sequences' tokens);
                             0 (default): it is prefilled alone between them.
                             Opt-in: its padded last chunk measured 1-55 % more
                             total time in noisy A/Bs (docs/USAGE.md) */
    int quiet;            /* no streamed text (tests) */
    int report_gap;       /* fetch logits each step; write the smallest top-2 gap to ids_path */
    int ignore_eos;       /* keep generating past EOS/EOT (tokenizer is_eog; benchmarks, tests) */
    const char *ids_path; /* when set, write prompt and generated ids as JSON */
    const char *logits_path; /* when set (one sequence only: not with prompts or
                                n_copies), the logits of every step into this file:
                                n_vocab little-endian binary32 per step, step 0 after
                                the prompt (the distribution of the first generated
                                token), step s after the s-th generated token; one row
                                per generated token. For comparisons with llama.cpp
                                (tests/reference/README.md) */
    const char *key_path; /* client key file (baton keygen): authenticate to every
                             server (in-process stages too); NULL = none */
    const char *key_name; /* where key_path came from, for messages: "--key"
                             (NULL) or "BATON_KEY_FILE" */
    const char *const *prompts; /* when set (n_prompts of them): several sequences, one
                                   per prompt, n_parallel at a time (run_parallel.c);
                                   greedy only; prompt and prompt_ids are ignored */
    size_t n_prompts;
    uint32_t n_parallel;  /* sequences decoded together (0 or 1: one at a time) */
    uint32_t n_groups;    /* pipeline groups of the n_parallel sequences (0 or 1: one),
                             at most 8 and n_parallel: group g's decode step overlaps
                             group g + 1's on the stages */
    uint32_t n_copies;    /* without prompts: prompt_ids as n_copies sequences (baton
                             bench --npl); 0: one prompt, the usual run */
    const char *output_dir; /* with prompts: DIR/N.txt per prompt, else "[N] " lines */
    int chat;             /* 1: prompt (or each of prompts) is a user's message, laid
                             out with the model's chat template (model/chat.h) and
                             chat_system; not with prompt_ids */
    const char *chat_system;   /* with chat: the system prompt, or NULL */
    const char *chat_template; /* with chat: a template name (baton_chat_from_name), or
                                  NULL: the one tokenizer.chat_template is recognized as */
    int chat_fd;          /* with chat: >= 0, a conversation: the user's messages are
                             read from this descriptor, one a line, and each is
                             answered (streamed to out, ending with a newline) with
                             the turns before it in the KV cache, until the input
                             ends; not with prompt_ids, prompts, n_copies or
                             logits_path (prompt is ignored). -1 (default): none */
    uint32_t keepalive_s; /* with chat_fd: while waiting for the next message, a
                             DEVICE_INFO to every stage each keepalive_s seconds
                             (default 30), so that a server's idle timeout
                             (batond's idle_timeout, 300 s by default) does not
                             close the connection while the user types */
    const struct baton_serve_config *serve; /* when set: `baton serve`, the prompts are
                                               HTTP requests' (n_parallel slots, each of
                                               n_ctx positions; n_predict the most a
                                               request may ask for); not with prompt,
                                               prompt_ids, prompts, chat_fd or outputs */
    const int32_t *prompt_ids; /* when set, these ids are the prompt (text is ignored) */
    size_t n_prompt_ids;
    struct baton_run_result *result; /* when set, filled on success */
    FILE *out;            /* streamed text (stdout) */
    FILE *log;            /* plan, progress, summary, errors (stderr) */
    const char *prog;     /* what errors start with: the command the user typed,
                             "baton run" or "baton bench" (default "baton") */
};

void baton_run_config_default(struct baton_run_config *cfg);

/* Whether listen (baton_serve_config's) is HOST:PORT or [IPV6]:PORT, port
 * 0..65535, and HOST resolves: 0, or -1 with one sentence in err (cap
 * bytes). baton serve checks it before it reads the model. */
int baton_serve_check_listen(const char *listen, char *err, size_t cap);

/* The key of an --api-key-file: its first line without the line end, 1 to
 * 1022 bytes, hashed with BLAKE2b-256 (crypto_generichash) into hash; the
 * line is wiped. 0, or -1 with one sentence in err (cap bytes): the file
 * cannot be read, the line is empty or too long. */
int baton_serve_read_key(const char *path, unsigned char hash[32], char *err, size_t cap);

/* The prompt tokens per prefill step when --ubatch is not given: 512 for
 * one stage or with the pipeline off; otherwise n_prompt / (4 n_stages),
 * rounded up, at least 32 and at most 512, so that the stages overlap over
 * several ubatches. (baton_run also caps the ubatch at the prompt's
 * length and at n_ctx.) */
uint32_t baton_run_default_ubatch(uint32_t n_prompt, uint32_t n_stages, int pipeline);

/* The environment's defaults for a CLI: BATON_SERVERS (cfg->servers, and
 * *servers_name = "BATON_SERVERS" for messages) and BATON_KEY_FILE
 * (cfg->key_path, cfg->key_name), each when set and not empty. The
 * command line overrides both afterwards. */
void baton_run_config_env(struct baton_run_config *cfg, const char **servers_name);

/* Checks the stage list without opening the model or any connection:
 * cfg->servers is "local" or 1..BATON_MAX_STAGES comma-separated entries
 * host:port or host:port@peerhost:peerport (port 1..65535, an IPv6 host in
 * brackets, each address shorter than 128 bytes), and cfg->split, when set,
 * parses and, unless servers is "local", has one part per server.
 * servers_name names the list in messages as the user gave it ("--servers",
 * or "BATON_SERVERS"; NULL = "--servers"). Returns 0, or 2 after printing
 * "PROG: ..." naming the bad entry to cfg->log. baton_run makes the same
 * check before it reads the model; the layer split itself needs the model. */
int baton_run_check_stages(const struct baton_run_config *cfg, const char *servers_name);

/* What the CLIs check before they read the model: baton_run_check_stages
 * (returns 2 on a bad list), then the client key file when cfg->key_path
 * is set, opened and closed as baton_run opens it (returns 1, the message
 * naming cfg->key_name). 0 when both are fine. */
int baton_run_precheck(const struct baton_run_config *cfg, const char *servers_name);

/* What the user can do about a failed connection to a server, as baton run
 * and baton info say it after "connect failed: E_X (text)": rc the status,
 * tcp nonzero when the TCP connection itself failed (else the handshake
 * after it), os_err the system's errno (0: none), have_key 0 when no
 * client key was given, 1 when --key gave it, 2 when BATON_KEY_FILE did
 * (the hint then names it: a user may not know the variable is set),
 * server_auth what the server's HELLO reply said
 * (struct baton_conn_options's server_auth: 1 it authenticates, 0 it
 * does not, -1 unknown). A static string, "" when there is nothing to
 * add; begins with "; ". */
const char *baton_run_connect_hint(int rc, int tcp, int os_err, int have_key, int server_auth);

/* Size in bytes of one stage's KV cache buffer as baton_run lays it out: for
 * each of n_layers layers a K and a V tensor, F32 or F16 {head_dim, n_ctx,
 * n_head_kv} (elem_bytes = 4 or 2: elem_bytes * head_dim * n_ctx *
 * n_head_kv bytes each), each starting at
 * a multiple of 64 bytes (BATON_BUFFER_ALIGN); a stage without layers still
 * gets one 64-byte buffer. Returns 0 with *bytes set, or BATON_E_OVERFLOW
 * (*bytes unchanged) when the size does not fit in 64 bits. */
int baton_run_kv_cache_bytes(uint32_t head_dim, uint32_t n_head_kv, uint32_t n_ctx,
                             uint32_t n_layers, uint32_t elem_bytes, uint64_t *bytes);

/* Runs the whole generation. Returns a process exit code: 0 success,
 * 1 runtime failure (message names the file, or the stage and endpoint; a
 * KV cache a server cannot hold for its size, because it is larger than the
 * server's largest buffer or refused with E_QUOTA or E_NOMEM, names the
 * context as ctx_origin says, the positions and the bytes the stage needs),
 * 2 bad configuration (also a --ctx whose KV cache would not fit in 64
 * bits). Every failure writes at least one "PROG: ..." line to cfg->log;
 * when streamed text on cfg->out has no final newline yet, a "\n" is
 * written to cfg->out first, so that the message starts its own line. */
int baton_run(const struct baton_run_config *cfg);

#endif
