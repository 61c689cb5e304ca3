/* Internal to the coordinator (src/model/run*.c): the run's state and the
 * parts a reader finds by name:
 *
 *   run.c         baton_run: tokenize, plan, upload, prefill, decode, summary
 *   run_plan.c    --servers / --split, connections, the direct path's set-up
 *   run_upload.c  weights, KV cache, I/O buffers, registered graphs and routes
 *   run_engine.c  the step engine: ubatches through the stages, pipelined
 *   run_parallel.c several sequences (--prompt-file, --npl) and conversations
 *   run_conv.c    a conversation's messages (--chat --interactive)
 *   run_stats.c   per-step statistics (--stats, --stats-json), --ids-file
 *   run_output.c  messages: errors that name the stage and what to change
 */
#ifndef BATON_MODEL_RUN_INTERNAL_H
#define BATON_MODEL_RUN_INTERNAL_H

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>

#include "baton/client.h"
#include "model/chat.h"
#include "model/gguf.h"
#include "model/llama.h"
#include "model/run.h"

#define RUN_ALIGN 64u
#define RUN_ENDPOINT_MAX 128
#define RUN_MAX_GRAPHS 32u /* registered graphs per stage: ubatch shapes x slots */
#define RUN_RING 16u       /* steps in flight at most (engine) */
#define RUN_MAX_GROUPS 8u  /* pipeline groups (--groups) */
#define RUN_CLEAN_STEPS 64u /* clean direct steps after which a boundary's failures are forgotten */

/* A graph registered on a stage's server for one (token count, slot). */
struct stage_graph {
    uint32_t n_tokens, n_out, slot;
    uint32_t id;
    struct baton_llama_graph_inputs in;
};

/* The boundary from stage i to stage i + 1; bounds[n_stages - 1] is the
 * decode ring, from the last stage's argmax to stage 1's token input. */
struct boundary {
    int direct;         /* the direct path is set up: grants, routes */
    char dest_name[RUN_ENDPOINT_MAX];
    uint32_t route[BATON_LLAMA_MAX_SLOTS];                 /* on stage i, per slot of i + 1 */
    uint32_t n_grants;  /* grants and routes set up (slots; 1 for the ring) */
    uint8_t grant[BATON_LLAMA_MAX_SLOTS][BATON_GRANT_ID_BYTES]; /* on stage i + 1 */
    struct baton_peer_dest dest0; /* slot 0's destination (run_open_links' copy) */
    uint64_t seq;       /* the last sequence number used (grows over the run) */
    int proven;         /* a copy went through since the last failure: copies go async */
    uint32_t fails;     /* copies not done, forgotten after RUN_CLEAN_STEPS clean steps */
    uint32_t clean;     /* steps whose copy went through since the last failure */
    uint64_t retry_step; /* after a failure, the direct path is tried again from this step */
    uint32_t last_outcome; /* for log lines: said once per change */
    float *host[BATON_LLAMA_MAX_SLOTS]; /* hub path: the hidden state through the coordinator */
};

/* One weight to upload: where it comes from and where it goes. */
struct upload_item {
    struct baton_gguf_tensor src;
    struct baton_tensor_desc *dst;
};

struct stage_rt {
    uint32_t index; /* 0-based */
    char endpoint[RUN_ENDPOINT_MAX];
    char peer_endpoint[RUN_ENDPOINT_MAX]; /* address other servers reach it at ("" = endpoint) */
    char addr[64]; /* the connected server's numeric address (baton_net_peer_string: "addr:port",
                      "[v6]:port", "unknown"; "" local) */
    struct baton_conn *conn;
    int need_reset; /* the next GRAPH_RUN clears the server's failed-run latch */
    /* statistics, decode window */
    uint64_t copies_done, copies_not_done, hidden_gets, hidden_sets;
    uint64_t peer_sent0, peer_recv0; /* the server's counters at the window's start */
    int peer_ok;
    uint64_t peer_sent, peer_recv; /* ... over the window */
    struct baton_cmd_stats cmd[BATON_CMD_LIMIT]; /* snapshot at the window's end */
    struct baton_llama_stage st;
    uint64_t weights_buf, kv_buf, io_buf;
    uint64_t weights_bytes, kv_bytes, io_bytes;
    uint64_t session_limit; /* DEVICE_INFO max_buffer_bytes: what one session may hold */
    struct baton_device_info info; /* the server's, read by run_prepare_stage */
    struct upload_item *items;     /* the stage's weights (run_prepare_stage), n_items */
    uint32_t n_items;
    struct baton_tensor_desc *leaves; /* graph building */
    struct baton_graph_node *nodes;
    uint32_t cap_leaves, cap_nodes;
    struct stage_graph graphs[RUN_MAX_GRAPHS];
    uint32_t n_graphs;
    uint64_t graphs_charged; /* what the registered graphs hold on the server */
    uint64_t scratch_max;    /* the scratch arena of the largest of them */
};

struct run {
    const struct baton_run_config *cfg;
    struct baton_gguf *gguf;
    struct baton_tokenizer *tok;
    struct baton_llama_hparams hp;
    struct baton_server *local; /* in-process server for --servers local */
    struct baton_key *key;      /* cfg->key_path, loaded (NULL: no authentication) */
    struct stage_rt *stages;
    struct boundary *bounds;    /* n_stages: the boundaries, then the decode ring */
    /* the decode ring's steps: called as each step retires, in order, with
     * its token; a non-zero return stops the steps after it (NULL: none) */
    int (*on_token)(struct run *r, int32_t token);
    void *on_token_arg;
    /* called as step k of the engine's batch retires (in order), after
     * on_token; it may fill the inputs of a later step that waits for k
     * (run_ubatch.after). 1: an error (said), the engine stops; 2: the
     * steps after k are not needed (their replies are read and dropped,
     * and the decode ring's grants sealed against their late writes). */
    int (*on_retire)(struct run *r, uint32_t k);
    void *on_retire_arg;
    uint32_t n_stages;
    uint32_t n_ubatch;          /* tokens per prefill step (cfg->n_ubatch or the default) */
    uint32_t n_tok_max;         /* most tokens in one step: max(n_ubatch, n_seq), or
                                   n_chunk + a group's slots (I/O sizes) */
    uint32_t n_chunk;           /* seqs with continuous batching: prompt tokens a mixed
                                   decode step carries (n_ubatch); 0: no mixed steps */
    int seqs;                   /* several sequences (cfg->prompts): {n,3} positions */
    int sampling;               /* cfg->temp > 0: the last stage samples (SAMPLE) */
    uint32_t n_seq;             /* sequences decoded together (1 unless seqs) */
    uint32_t n_groups;          /* pipeline groups of the n_seq slots (seqs) */
    uint32_t n_cells;           /* KV-cache cells per layer: n_ctx per sequence x n_seq */
    struct baton_chat_prompt *chat; /* cfg->chat: each prompt laid out (run_chat_prepare);
                                       cfg then points at a copy naming these texts */
    size_t n_chat;
    const char **chat_texts;    /* cfg->prompts with cfg->chat: the texts of chat */
    int conv;                   /* cfg->chat_fd >= 0: a conversation, one turn a sequence
                                   (run_conv.c, run_parallel.c) */
    enum baton_chat_template chat_tmpl; /* conv: the template its turns are laid out in */
    struct run_conv *conv_in;   /* conv: the reader of the user's messages */
    int serve;                  /* cfg->serve: the sequences are HTTP requests' (serve.c) */
    int chat_ok;                /* serve: chat_tmpl lays out chat requests */
    struct run_serve *srv;      /* serve: the HTTP server and its request queue */
    struct par_seq *par;        /* cfg->prompts: one per prompt (run_parallel.c) */
    size_t n_par;               /* ... n_par of them (cfg->n_prompts or cfg->n_copies) */
    size_t n_prompt_max;        /* the longest prompt's tokens (kv_fail's hint) */
    uint32_t n_slots;           /* boundary input slots per stage */
    uint32_t tok_slots;         /* stage 1's token input slots in use: 1, or n_slots when
                                   the decode ring runs over pipeline groups (run_plan.c) */
    uint32_t ring_gap;          /* a decode-ring step takes the tokens of the step this many
                                   before it (its group's previous step); 0 means 1 */
    int want_logits;            /* every step returns the logits too (sampling, gaps) */
    float *logits;              /* n_vocab */
    uint64_t n_steps;           /* steps begun so far (numbers the steps) */
    uint64_t hidden_bytes_hub;  /* hidden-state bytes through the coordinator */
    uint64_t token_bytes;       /* token ids, positions, last index and argmax bytes */
    uint64_t logits_bytes;      /* logits bytes */
    uint64_t waits;             /* times the engine blocked for a reply it needed */
    uint64_t ring_tokens;       /* tokens that reached stage 1 around the ring, whole run */
    uint64_t redos;             /* steps redone through the hub after a failed hand-off */
    uint32_t n_direct;          /* boundaries on the direct path */
    double min_gap;             /* smallest top-2 logit gap seen (report_gap) */
    FILE *logits_out;           /* cfg->logits_path, open during the run */
    int text_open;              /* text streamed to cfg->out without its final newline */
};

/* ---- run_output.c ---- */
double run_now_s(void);
uint64_t run_align_up(uint64_t v);
/* Bytes a server charges a session for a buffer of n bytes, at least: whole
 * pages (server/handles.c; 4 KiB, the smallest page of its hosts);
 * UINT64_MAX past that. */
static inline uint64_t run_page_up(uint64_t n)
{
    return n > UINT64_MAX - 4095 ? UINT64_MAX : (n + 4095) & ~(uint64_t)4095;
}
/* "N bytes", or one decimal in the largest binary unit ("5.9 GiB"). */
void run_format_bytes(char *buf, size_t cap, uint64_t n);
/* The context as the user set it ("--ctx 8000", "the default --ctx 512",
 * bench's "-p P + -n N (a KV cache of C positions: ...)"), truncated to
 * cap; RUN_CTX_NAME_CAP holds every form. */
#define RUN_CTX_NAME_CAP 160
void run_ctx_name(const struct baton_run_config *cfg, char *buf, size_t cap);
/* What to do about a context too small for need positions: "give --ctx
 * N or more", with "(more than the model was trained for: llama.context_length
 * 2048)" where N is past the model's context, or "lower -n" where N cannot
 * be a --ctx. Truncated to cap; RUN_CTX_HINT_CAP holds every form. */
#define RUN_CTX_HINT_CAP 200
void run_ctx_hint(const struct run *r, unsigned long long need, char *buf, size_t cap);

/* Tokenizes text[0..len) (len <= BATON_TOKENIZER_MAX_TEXT_BYTES), with BOS
 * as the model's tokenizer.ggml.add_bos_token says, into *ids: calloc'd,
 * room for max(len + 8, *n_ids) ids, the caller frees it. A vocabulary
 * without a piece for some text falls back to bytes, up to 3 ids for a
 * space ("▁" is 3 bytes): then a second pass with the whole count that
 * the first reported. 0, BATON_E_NOMEM, or baton_tokenize's error (*ids
 * NULL then). With cfg->chat, text is prompt which's layout (r->chat):
 * the template's markers are control tokens, the rest is text. */
int run_tokenize_prompt(struct run *r, size_t which, const char *text, size_t len,
                        int32_t **ids, size_t *n_ids);
/* run_tokenize_prompt's work: text with baton_tokenize's flags (BOS only
 * when flags say), and with chat (not NULL) its spans as the only places
 * where control-token text becomes that token. */
int run_tokenize_text(struct run *r, const char *text, size_t len, unsigned flags,
                      const struct baton_chat_prompt *chat, int32_t **ids, size_t *n_ids);
/* "PROG: " + the rest, to cfg->log. */
void run_msg(const struct baton_run_config *cfg, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* run_msg once text may have been streamed: an open line of text on
 * cfg->out is ended first. */
void stage_msg(struct run *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Where a server limit a hint names is set: " (batond FLAG)" for stages
 * on batond; "" for the in-process stages (--servers local), which run
 * with batond's default limits and have no flag to pass. */
const char *run_limit_flag(const struct run *r, const char *flag_text);

/* Where the graphs a stage may register are capped: the batond flag with
 * its default, or the in-process stages' fixed 32. */
const char *run_graphs_limit(const struct run *r);

/* The option that set the sequences at a time: "--npl" for baton bench,
 * else "--parallel". */
const char *run_seq_flag(const struct baton_run_config *cfg);
/* "PROG: stage i (ENDPOINT): WHAT failed: E_X (text)" with what the user
 * can do. Returns 1. */
int stage_fail(struct run *r, const struct stage_rt *s, const char *what, int rc);
/* Flushes f, which takes generated text: 0, or 1 after "WHAT: cannot
 * write: REASON" when a write to it failed (a full disk, a closed pipe),
 * so a run stops at its first lost text rather than at its end. */
int run_flush_out(struct run *r, FILE *f, const char *what);
/* run_flush_out of cfg->out, named "standard output" when it is stdout. */
int run_flush_text(struct run *r);
/* The same for a connection (tcp: the TCP connect, else the handshake);
 * os_err, when nonzero, is the TCP connect's errno, printed in place of
 * E_IO's generic text; server_auth as baton_run_connect_hint's. */
int connect_fail(struct run *r, const struct stage_rt *s, int rc, int tcp, int os_err,
                 int server_auth);
/* A step on stage s (NULL: unknown) refused by a server limit: what it
 * asked for, or what grows with what. */
void step_limit_hint(struct run *r, const struct stage_rt *s, int rc);
/* What would fit a stage's session (run_upload.c: session_check): the most
 * positions per sequence (--ctx) at this run's sequences, the most
 * sequences at its --ctx (0: none, or one sequence), and whether an F16
 * KV cache would at its --ctx. */
struct run_kv_fits {
    uint32_t ctx, seqs;
    int f16;
    uint32_t ubatch; /* the largest smaller --ubatch that fits at this --ctx (0: none) */
};
/* A KV cache a server cannot hold, in terms of --ctx, then what would fit
 * it (quota: the session's memory limit is what it is past). fits: what
 * would (NULL: not known, e.g. a server's refusal); where known, the hint
 * names the largest --ctx and --parallel that fit, and offers --kv-type f16
 * only where it fits. Returns 1. */
int kv_fail(struct run *r, const struct stage_rt *s, uint64_t kv_bytes, const char *why,
            int quota, const struct run_kv_fits *fits);
/* kv_fail's first line alone: what the KV cache needs on stage s, and why
 * it does not fit ("; " then why); exact: the bytes too (where rounded
 * figures would look equal). */
void kv_need_line(struct run *r, const struct stage_rt *s, uint64_t kv_bytes, const char *why,
                  int exact);
/* kv_fail's second line alone: what would fit. s names the stage whose
 * layers a split could move (NULL: none). */
void kv_fit_line(struct run *r, const struct stage_rt *s, int quota,
                 const struct run_kv_fits *fits);
/* The tokens of a prefill step, named as the user set them: "--ubatch 64",
 * "the default --ubatch 512", "the prompt's 5 tokens in one step; --ubatch
 * sets fewer", or "the prompt's 5 tokens, under --ubatch 512". */
void run_ubatch_name(const struct run *r, char *buf, size_t cap);
/* After a refused weights ALLOC_BUFFER: the limits that apply. */
void weights_alloc_hint(struct run *r, const struct stage_rt *s,
                        const struct baton_device_info *info, int rc);
/* The name of a COPY_TENSOR_TO outcome for the coordinator's lines. */
const char *run_outcome_name(uint32_t outcome);

/* ---- run_plan.c ---- */
/* Stage count and split proportions from --servers / --split; -1 after a
 * message. */
int run_plan_parts(const struct baton_run_config *cfg, const char *servers_name, double *props);
/* Connects every stage (or starts the in-process server). 0, 1 or 2. */
int run_connect_stages(struct run *r);
/* Sets up the direct path at every boundary whose servers both offer it:
 * one grant per input slot of the next stage, one route per slot on the
 * source; prints one plan line per boundary. 0 or 1. */
int run_setup_direct(struct run *r);
/* Opens the peer link of every direct boundary (the decode ring's too)
 * before the first step: one synchronous COPY_TENSOR_TO on each source, all
 * at once, of the first 4 bytes of the route's tensor into slot 0's grant
 * as the boundary's next sequence number (nothing reads that slot before
 * the first step's write, whose number is higher). The dial, the peer
 * handshake and the destination's new connection then cost the setup, not
 * the first step, and a boundary whose copy was done starts with
 * asynchronous hand-offs. A copy not done is said as a step's would be,
 * and counts as the boundary's first failure: the first step goes through
 * the hub, the direct path is tried again after 1, 2, 4 ... steps. 0, or 1
 * after a stage's error was said. (run_engine.c) */
int run_open_links(struct run *r);
/* Stage 1's token input slots the run will use (r->tok_slots once the
 * decode ring is set up): its --slots where the ring will run over pipeline
 * groups, else 1. The same conditions as the ring's setup, asked before
 * any upload (the graphs a stage registers count them). */
uint32_t run_planned_tok_slots(struct run *r);
/* This session's peer counters on the server of s. 0 or the call's error. */
int run_query_peer(struct stage_rt *s, uint64_t *sent, uint64_t *received);

/* ---- run_upload.c ---- */
/* Reads stage s's DEVICE_INFO, finds its weights in the GGUF and lays out
 * its weights, KV cache and I/O buffers (nothing sent yet). 0 or 1 after a
 * message. */
int run_prepare_stage(struct run *r, struct stage_rt *s);
/* After every stage is prepared, before any upload: do the stages'
 * sessions hold their weights, KV caches, I/O buffers, and the graphs the
 * run registers with the largest step's scratch arena? Each within its
 * server's limit for one session (DEVICE_INFO max_buffer_bytes), and the
 * scratch arena within the fixed limit (BATON_SCRATCH_LIMIT_BYTES);
 * in-process stages, which share one machine's memory, all together within
 * it. 0, or 1 after a message in terms of what the user sets (--ctx,
 * --parallel, --kv-type, --ubatch, --split), with the largest --ctx and
 * --parallel with which every stage fits. */
int run_check_sessions(struct run *r);
/* Uploads stage s's weights, allocates its KV cache and I/O buffers
 * (run_prepare_stage first). */
int run_upload_stage(struct run *r, struct stage_rt *s, double *bytes_total);
/* Bytes of the hidden state of one ubatch (n_embd x n_ubatch floats). */
uint64_t run_hidden_state_bytes(const struct run *r);
/* Registers on every stage the graphs of the given token counts (n_counts
 * of them, 0 entries skipped) for every input slot. 0 or 1. */
int run_register_graphs(struct run *r, const uint32_t *counts, uint32_t n_counts);
/* ... with outs[c] output tokens for counts[c] on the last stage (1, or
 * counts[c]: baton_llama_build_stage_out); outs NULL: all 1. */
int run_register_graphs_out(struct run *r, const uint32_t *counts, const uint32_t *outs,
                            uint32_t n_counts);
/* As run_register_graphs_out, for shapes the run can do without (smaller
 * decode steps): a shape over a limit (RUN_MAX_GRAPHS, or the server's
 * max_graphs_per_session: BATON_E_LIMIT) ends the registration quietly
 * with 0; other failures are errors (said), 1. */
int run_register_graphs_optional(struct run *r, const uint32_t *counts, const uint32_t *outs,
                                 uint32_t n_counts);
/* 1 if every stage (every input slot) has the graph for n tokens and n_out
 * outputs, else 0. */
int run_has_shape(struct run *r, uint32_t n, uint32_t n_out);
/* The input slots stage s registers graphs for: r->n_slots, or on the
 * first stage r->tok_slots (1 unless the decode ring runs over pipeline
 * groups). */
uint32_t run_stage_slots(const struct run *r, const struct stage_rt *s);
/* The registered graph of stage s for n tokens read from input slot
 * slot mod run_stage_slots, or NULL. */
const struct stage_graph *run_stage_graph(const struct run *r, struct stage_rt *s, uint32_t n,
                                          uint32_t n_out, uint32_t slot);

/* ---- run_engine.c ---- */
/* One ubatch: n tokens (tokens[0..n)) at positions pos0.. */
struct run_ubatch {
    const int32_t *tokens;
    uint32_t n;
    uint32_t pos0;
    /* several sequences (r->n_seq > 1): NULL, or 3n values: the n
     * positions, the n KV-cache cells written, the n first cells read
     * (ATTENTION's {n,3} form); positions pos0.. when NULL */
    const int32_t *seqpos;
    uint32_t n_out; /* 0 or 1: the last token's argmax; n: every token's, into out[0..n) */
    int32_t *out;
    /* with r->sampling: 6 words per output token (SAMPLE's parameters,
     * core/ops.h), set on the last stage before its run */
    const int32_t *sample;
    /* 0, or j + 1: this step's inputs exist only once step j of the batch
     * has retired (on_retire fills them): stage 1 is sent it after that.
     * Pipeline groups: a group's next decode step waits for its last. */
    uint32_t after;
};
/* A decode-ring step has tokens NULL: its n token ids are the outputs
 * (n_out = n, in order) of step k - r->ring_gap, which the last stage hands
 * straight to stage 1 (the decode ring, when set up) or which the
 * coordinator sets (that step's out, or its argmax when n is 1). */
/* Runs ubatches[0..m) through every stage in order (pipelined unless
 * cfg->pipeline is 0); on success *next is the last stage's argmax of the
 * last ubatch and, with r->want_logits, r->logits its logits. 0 or 1 (after
 * a message naming the stage). */
int run_engine(struct run *r, const struct run_ubatch *ub, uint32_t m, int32_t *next);

/* ---- run_conv.c: a conversation (cfg->chat_fd) ---- */

/* Reads the user's next message from cfg->chat_fd: a line (ending at LF,
 * its CR before the LF dropped; blank lines skipped; the last may lack its
 * LF). *msg points into the reader's buffer (len bytes, may hold NUL),
 * valid until the next call. When the input is a terminal, "> " on
 * cfg->log asks for it. While it waits, a DEVICE_INFO to every stage each
 * cfg->keepalive_s seconds keeps the connections inside the servers' idle
 * timeout (batond's default is 300 s). 1: a message; 0: the input ended;
 * -1: an error (said: the input unreadable, a message longer than
 * BATON_TOKENIZER_MAX_TEXT_BYTES, a stage gone). */
int run_conv_read(struct run *r, const char **msg, size_t *len);

/* The ids of a conversation's next turn: prev[0, n_prev) (the turns so far,
 * the last reply without the end-of-generation token it ended with; NULL
 * and 0 for the first turn), then msg laid out in r->chat_tmpl: the first
 * turn with cfg->chat_system and BOS as the model says
 * (baton_chat_format), a later one closing the reply before it
 * (baton_chat_format_next). *ids is malloc'd (the caller frees it). 0, or
 * an exit code after a message. */
int run_conv_turn(struct run *r, const int32_t *prev, size_t n_prev, const char *msg,
                  size_t len, int32_t **ids, size_t *n_ids);

void run_conv_free(struct run *r);

/* A DEVICE_INFO to every stage, so that a server's idle timeout does not
 * close a connection while the coordinator waits (for a message, or an
 * HTTP request). 0, or -1 after a message naming the stage. */
int run_keepalive(struct run *r);

/* ---- serve.c: `baton serve` (cfg->serve) ---- */

/* The prompt tokens of a request admitted while others decode that ride in
 * each of their decode steps (run.c's serve_chunk). */
#define RUN_SERVE_CHUNK 64u

/* One HTTP request's sequence; shared by its connection's thread and the
 * engine (reference-counted, under the server's lock). */
struct serve_req;

/* What the engine runs of a request: its prompt's ids (a block with room
 * for n_prompt + n_max ids, which the engine then owns and frees),
 * 1 <= n_prompt, n_prompt + n_max <= cfg->n_ctx, and SAMPLE's parameters
 * (run_sample_params' fields: temperature 0 is greedy). */
struct run_serve_seq {
    int32_t *ids;
    size_t n_prompt, n_max;
    float temp, top_p;
    uint32_t top_k;
    uint64_t seed;
};

/* Starts the HTTP server on cfg->serve->listen (its threads tokenize and
 * queue requests; the engine runs them). 0, or an exit code after a
 * message. */
int run_serve_start(struct run *r);
/* The next queued request, its sequence into *seq; NULL when none is
 * queued. wait: blocks until one is, keeping the stages' connections open
 * (run_keepalive every cfg->keepalive_s seconds); NULL then means the
 * server stops (a signal; run_serve_stopping) or a stage was lost (said). */
struct serve_req *run_serve_take(struct run *r, int wait, struct run_serve_seq *seq);
/* Whether the server stops: 0 no, 1 SIGINT or SIGTERM asked it to, 2 a
 * stage was lost while it waited for a request (said). */
int run_serve_stopping(struct run *r);
/* A piece of q's reply (a token's text, len bytes, any bytes). 1 when q's
 * client has gone, or when its text now holds one of its stop strings (the
 * reply is cut before it): the sequence should end with this token; else
 * 0. */
int run_serve_piece(struct serve_req *q, const char *piece, size_t len);
/* q's first `cached` prompt ids were held by its slot's cells (the prefix
 * cache): not computed, and counted in its reply's usage. */
void run_serve_cached(struct serve_req *q, size_t cached);
/* q's reply has ended (eog: at an end-of-generation token, "stop"; else
 * at a stop string, "stop", or at its max_tokens or the context, "length")
 * after n_gen tokens (the one that ended it counted); the engine's
 * reference is dropped. */
void run_serve_done(struct serve_req *q, int eog, size_t n_gen);
/* q fails with why (its client gets 503 and why); the engine's reference
 * is dropped. */
void run_serve_fail(struct serve_req *q, const char *why);
/* Fails every queued request with why, stops the HTTP server (waiting for
 * its connections to end) and frees it. Safe without a server. */
void run_serve_stop(struct run *r, const char *why);

/* ---- run_parallel.c: several sequences (cfg->prompts) ---- */
struct par_seq;
/* Tokenizes and checks every prompt, sets r->seqs, n_seq, n_cells and
 * *max_prompt (the longest prompt's tokens). 0, 1 or 2 (usage; said). */
int run_par_prepare(struct run *r, size_t *max_prompt);
/* The step shapes a run of several sequences registers before it starts
 * (run_par_register): token counts and outputs of the prefill ubatch, each
 * prompt's rest in powers of two, the decode step per group and the mixed
 * steps of continuous batching; at most RUN_PAR_SHAPES. Returns how many.
 * (The shrunk decode steps registered after them are optional: a server
 * short of room for them runs without.) */
#define RUN_PAR_SHAPES 40
uint32_t run_par_shapes(const struct run *r, uint32_t *counts, uint32_t *outs);
/* Whether a step of count tokens and out outputs surely runs: a prompt
 * prefilled alone takes it, or it is a group's full decode step (the mixed
 * steps of continuous batching may not run). */
int run_par_shape_runs(const struct run *r, uint32_t count, uint32_t out);
/* Registers the step shapes of every prompt and the decode step. 0 or 1. */
int run_par_register(struct run *r);
/* Admits, prefills and decodes every prompt; prints the summary, writes
 * the statistics and --ids-file. 0 or 1. */
int run_par_generate(struct run *r, double t_load, double bytes);
void run_par_free(struct run *r);

/* run.c: SAMPLE's 6 parameter words (core/ops.h) for one output token:
 * cfg's temperature, top_p and top_k, seed, and the token's position as
 * the counter. */
void run_sample_params(const struct baton_run_config *cfg, uint64_t seed, uint32_t counter,
                       int32_t p[6]);
/* The same words from the parameters themselves (a request's, baton serve). */
void run_sample_params_of(float temp, float top_p, uint32_t top_k, uint64_t seed,
                          uint32_t counter, int32_t p[6]);

/* run.c: the decode window's statistics begin (begin = 1) or end. */
void run_stats_window(struct run *r, int begin);

/* ---- run_stats.c ---- */
void run_print_stats(struct run *r, uint32_t steps);
int run_write_stats_json(struct run *r, const char *path, uint32_t steps);
int run_write_ids(const char *path, const int32_t *prompt, size_t n_prompt, const int32_t *gen,
                  size_t n_gen, int with_gap, double min_gap);

#endif
