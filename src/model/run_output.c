/* The coordinator's messages (run_internal.h): every error names the
 * command the user typed, the stage and its endpoint, and what to change. */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "baton/status.h"
#include "compute/compute.h"
#include "core/limits.h"
#include "model/run_internal.h"

double run_now_s(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

uint64_t run_align_up(uint64_t v)
{
    return (v + (RUN_ALIGN - 1)) & ~(uint64_t)(RUN_ALIGN - 1);
}

static void run_vmsg(const struct baton_run_config *cfg, const char *fmt, va_list ap)
{
    flockfile(cfg->log);
    fprintf(cfg->log, "%s: ", cfg->prog ? cfg->prog : "baton");
    vfprintf(cfg->log, fmt, ap);
    funlockfile(cfg->log);
}

/* Prints "PROG: " and the formatted rest (which ends in "\n") to cfg->log:
 * every error and notice names the command the user typed (cfg->prog). */
void run_msg(const struct baton_run_config *cfg, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    run_vmsg(cfg, fmt, ap);
    va_end(ap);
}

/* Whether two streams write to one file (a terminal, or 2>&1). */
static int same_file(FILE *a, FILE *b)
{
    struct stat sa, sb;

    return fstat(fileno(a), &sa) == 0 && fstat(fileno(b), &sb) == 0 && sa.st_dev == sb.st_dev &&
           sa.st_ino == sb.st_ino;
}

/* run_msg once text may have been streamed: when cfg->out and cfg->log
 * write to one file (a terminal, where they share the screen, or 2>&1), a
 * line of text on cfg->out without its newline is ended first (and
 * flushed), so that the message does not continue the text ("Once upon a
 * timebaton run: ..."); when they go to different files, cfg->out receives
 * nothing but the text (a failed run ends its line when it stops). */
void stage_msg(struct run *r, const char *fmt, ...)
{
    va_list ap;

    if (r->text_open && same_file(r->cfg->out, r->cfg->log)) {
        fputc('\n', r->cfg->out);
        fflush(r->cfg->out);
        r->text_open = 0;
    }
    va_start(ap, fmt);
    run_vmsg(r->cfg, fmt, ap);
    va_end(ap);
}

int run_flush_out(struct run *r, FILE *f, const char *what)
{
    errno = 0;
    if (fflush(f) == 0 && !ferror(f))
        return 0;
    r->text_open = 0; /* nothing more goes to f */
    run_msg(r->cfg, "%s: cannot write: %s\n", what, errno ? strerror(errno) : "write error");
    return 1;
}

int run_flush_text(struct run *r)
{
    return run_flush_out(r, r->cfg->out,
                         r->cfg->out == stdout ? "standard output" : "the text's output");
}

/* "N bytes", or one decimal in the largest binary unit below it ("5.9 GiB"). */
void run_format_bytes(char *buf, size_t cap, uint64_t n)
{
    static const char *const units[] = {"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
    double v = (double)n;
    int u = -1;

    while (v >= 1024.0 && u < 5) {
        v /= 1024.0;
        u++;
    }
    if (u < 0)
        snprintf(buf, cap, "%" PRIu64 " bytes", n);
    else
        snprintf(buf, cap, "%.1f %s", v, units[u]);
}

void run_ctx_hint(const struct run *r, unsigned long long need, char *buf, size_t cap)
{
    char trained[96];

    if (need > UINT32_MAX) {
        snprintf(buf, cap, "lower -n (--ctx is at most %u)", UINT32_MAX);
        return;
    }
    if (need <= r->hp.n_ctx_train) {
        snprintf(buf, cap, "give --ctx %llu or more", need);
        return;
    }
    baton_llama_ctx_train_desc(&r->hp, trained, sizeof trained);
    snprintf(buf, cap, "give --ctx %llu or more (more than the model was trained for: %s)", need,
             trained);
}

/* The context (n_ctx) as the user set it, or did not (cfg->ctx_origin):
 * "--ctx 8000", "the default --ctx 512", "-p 50 + -n 4 (a KV cache of 62
 * positions)". */
void run_ctx_name(const struct baton_run_config *cfg, char *buf, size_t cap)
{
    switch (cfg->ctx_origin) {
    case BATON_CTX_DEFAULT:
        snprintf(buf, cap, "the default --ctx %u", cfg->n_ctx);
        break;
    case BATON_CTX_BENCH:
        snprintf(buf, cap, "-p %zu + -n %u (a KV cache of %u positions: -p + -n + 8, or the "
                 "model's context length if less)", cfg->n_prompt_ids, cfg->n_predict, cfg->n_ctx);
        break;
    default:
        snprintf(buf, cap, "--ctx %u", cfg->n_ctx);
        break;
    }
}

/* The KV cache is the one buffer whose size the user sets (--ctx, or bench's
 * -p + -n): a server that cannot hold it for its size is reported in those
 * terms, with the bytes the stage needs, and why ("; the server ...").
 * Returns 1. */
void kv_need_line(struct run *r, const struct stage_rt *s, uint64_t kv_bytes, const char *why,
                  int exact)
{
    const struct baton_run_config *cfg = r->cfg;
    const uint32_t n_layers = s->st.layer_end - s->st.layer_begin;
    char size[64], ctx[RUN_CTX_NAME_CAP], many[96] = "";

    run_format_bytes(size, sizeof size, kv_bytes);
    if (exact) {
        char rounded[32];

        memcpy(rounded, size, sizeof rounded);
        rounded[sizeof rounded - 1] = '\0';
        snprintf(size, sizeof size, "%" PRIu64 " bytes (%s)", kv_bytes, rounded);
    }
    run_ctx_name(cfg, ctx, sizeof ctx);
    if (r->n_seq > 1 && cfg->n_parallel > r->n_seq) /* no more slots than prompts */
        snprintf(many, sizeof many, " x %u sequences (%s %u, %u prompts)", r->n_seq,
                 run_seq_flag(cfg), cfg->n_parallel, r->n_seq);
    else if (r->n_seq > 1) /* several sequences: a range of cells each */
        snprintf(many, sizeof many, " x %u sequences (%s)", r->n_seq, run_seq_flag(cfg));
    stage_msg(r, "%s%s needs %s of KV cache on stage %u (%s, %u layer%s); %s\n", ctx, many, size,
              s->index + 1, s->endpoint, n_layers, n_layers == 1 ? "" : "s", why);
}

void kv_fit_line(struct run *r, const struct stage_rt *s, int quota,
                 const struct run_kv_fits *fits)
{
    const struct baton_run_config *cfg = r->cfg;
    const uint32_t n_layers = s ? s->st.layer_end - s->st.layer_begin : 0;
    const uint64_t n_prompt = r->n_prompt_max;
    /* a --ctx that is already the longest prompt + -n cannot shrink */
    const int ctx_min = n_prompt + cfg->n_predict >= cfg->n_ctx;
    const int bench = cfg->ctx_origin == BATON_CTX_BENCH ||
                      (ctx_min && strcmp(run_seq_flag(cfg), "--npl") == 0);
    const int known = fits != NULL;
    const uint32_t ctx_fit = known ? fits->ctx : 0, seq_fit = known ? fits->seqs : 0;
    /* a context that holds the longest prompt and one token more (bench:
     * -p 1 + -n 1 + its 8 positions) */
    const int ctx_useful = known && (bench ? ctx_fit >= 10 : ctx_fit > n_prompt);
    const char *const each = r->n_seq > 1 ? " each" : "", *const s_fit = ctx_fit == 1 ? "" : "s";
    /* (bench: ctx_useful means ctx_fit >= 10, so ctx_fit - 8 >= 2) */
    char shrink[192] = "", fewer_seq[64] = "", half[48] = "", ubatch[32] = "";
    char fewer_layers[96] = "";

    /* what shrinks it: the bytes are positions x sequences x layers x
     * (K + V) x the element size (baton_run_kv_cache_bytes) */
    if (bench && cfg->ctx_origin != BATON_CTX_BENCH && ctx_useful) /* bench --ctx N */
        snprintf(shrink, sizeof shrink, "--ctx %u or less, with -p + -n at most %u", ctx_fit,
                 ctx_fit);
    else if (bench && ctx_useful)
        snprintf(shrink, sizeof shrink,
                 "a smaller -p or -n (-p + -n at most %u: a KV cache of %u positions%s)",
                 ctx_fit - 8, ctx_fit, each);
    else if (bench && !known)
        snprintf(shrink, sizeof shrink, "a smaller -p or -n");
    else if (bench)
        shrink[0] = '\0'; /* no -p + -n fits: the other remedies below */
    else if (ctx_min && ctx_fit > 0 && ctx_fit <= n_prompt) /* the prompt alone is more */
        snprintf(shrink, sizeof shrink,
                 "a shorter prompt and a smaller -n (at most %u position%s%s fit, the "
                 "prompt's and -n's together)",
                 ctx_fit, s_fit, each);
    else if (ctx_min && ctx_fit > 0)
        snprintf(shrink, sizeof shrink,
                 "a shorter prompt or a smaller -n (at most %u position%s%s with the prompt; "
                 "--ctx is already the prompt + -n)",
                 ctx_fit, s_fit, each);
    else if (ctx_useful && ctx_fit < n_prompt + cfg->n_predict) /* -n must shrink too */
        snprintf(shrink, sizeof shrink, "--ctx %u or less with -n %u or less (the %sprompt takes "
                 "%u of its positions)",
                 ctx_fit, ctx_fit - (uint32_t)n_prompt, r->seqs ? "longest " : "",
                 (uint32_t)n_prompt);
    else if (ctx_min)
        snprintf(shrink, sizeof shrink,
                 "a shorter prompt or a smaller -n (--ctx is already the prompt + -n)");
    else if (ctx_useful)
        snprintf(shrink, sizeof shrink, "--ctx %u or less", ctx_fit);
    else if (!known)
        snprintf(shrink, sizeof shrink, "a smaller --ctx");
    if (r->n_seq > 1 && (!known || seq_fit >= 1))
        snprintf(fewer_seq, sizeof fewer_seq,
                 !known         ? "%sfewer sequences (%s)"
                 : seq_fit == 1 ? "%s%s %u"
                                : "%s%s %u or fewer",
                 shrink[0] ? ", " : "", run_seq_flag(cfg), seq_fit);
    /* half the bytes: offered where they fit at this --ctx */
    if (cfg->kv_type != BATON_TYPE_F16 && (!known || fits->f16))
        snprintf(half, sizeof half, "%s--kv-type f16 (half the bytes)",
                 shrink[0] || fewer_seq[0] ? ", " : "");
    /* a smaller step's scratch arena */
    if (known && fits->ubatch > 0)
        snprintf(ubatch, sizeof ubatch, "%s--ubatch %u or less",
                 shrink[0] || fewer_seq[0] || half[0] ? ", " : "", fits->ubatch);
    /* in-process stages share this machine's memory: a split moves
     * nothing off it */
    if (n_layers > 1 && !r->local)
        snprintf(fewer_layers, sizeof fewer_layers,
                 "%sfewer layers on stage %u (--split, or one more server in --servers)",
                 shrink[0] || fewer_seq[0] || half[0] || ubatch[0] ? ", " : "", s->index + 1);
    /* past the session's memory, which the stage's weights share, or (a
     * known room) the server's memory for all sessions */
    if ((quota || known) && !r->local)
        stage_msg(r, "to fit: %s%s%s%s%s%sa batond with a larger %s%s\n", shrink, fewer_seq,
                  half, ubatch, fewer_layers,
                  shrink[0] || fewer_seq[0] || half[0] || ubatch[0] || fewer_layers[0] ? ", or "
                                                                                       : "",
                  quota ? "--session-memory-bytes" : "--total-memory-bytes",
                  quota && r->key ? " (or its --client's session_memory_bytes)" : "");
    else if (shrink[0] || fewer_seq[0] || half[0] || ubatch[0] || fewer_layers[0])
        stage_msg(r, "to fit: %s%s%s%s%s\n", shrink, fewer_seq, half, ubatch, fewer_layers);
    else if (r->local)
        stage_msg(r, "to fit: servers with more memory (--servers)\n");
}

int kv_fail(struct run *r, const struct stage_rt *s, uint64_t kv_bytes, const char *why,
            int quota, const struct run_kv_fits *fits)
{
    kv_need_line(r, s, kv_bytes, why, 0);
    kv_fit_line(r, s, quota, fits);
    return 1;
}

void run_ubatch_name(const struct run *r, char *buf, size_t cap)
{
    const uint32_t dflt = baton_run_default_ubatch((uint32_t)r->n_prompt_max, r->n_stages,
                                                   r->cfg->pipeline);

    if (r->cfg->n_ubatch != 0 && r->cfg->n_ubatch != r->n_ubatch) /* no step is longer */
        snprintf(buf, cap, "the %sprompt's %u token%s, under --ubatch %u",
                 r->seqs ? "longest " : "", r->n_ubatch, r->n_ubatch == 1 ? "" : "s",
                 r->cfg->n_ubatch);
    else if (r->cfg->n_ubatch != 0)
        snprintf(buf, cap, "--ubatch %u", r->n_ubatch);
    else if (r->n_ubatch < dflt)
        snprintf(buf, cap, "the %sprompt's %u token%s in one step; --ubatch sets fewer",
                 r->seqs ? "longest " : "", r->n_ubatch, r->n_ubatch == 1 ? "" : "s");
    else
        snprintf(buf, cap, "the default --ubatch %u", r->n_ubatch);
}

/* baton_run_connect_hint's have_key: 0 no client key, 1 --key's, 2
 * BATON_KEY_FILE's (run.c's cfg->key_name). */
static int run_key_from(const struct run *r)
{
    if (r->key == NULL)
        return 0;
    return r->cfg->key_name != NULL && strcmp(r->cfg->key_name, "BATON_KEY_FILE") == 0 ? 2 : 1;
}

/* What the user can do about a refused handshake (E_AUTH): give the key
 * the server wants, or the right one; "" for any other status. */
static const char *status_hint(const struct run *r, int rc)
{
    if (rc == BATON_E_IO && r->conv && r->n_par > 1) /* it waited for a message */
        return "; the server closed the connection: it was stopped, it died, or its idle "
               "timeout passed while this conversation waited (its log says which; "
               "--keepalive S below that timeout keeps it open)";
    if (rc == BATON_E_IO) /* no notice tells a server stopping from one that died */
        return "; the server closed the connection: it was stopped or it died (its log says "
               "which: batond logs 'stopped' after a drain)";
    return rc == BATON_E_AUTH ? baton_run_connect_hint(rc, 0, 0, run_key_from(r), -1) : "";
}

/* "PROG: stage i (ENDPOINT): WHAT failed: E_X (text)", with what the user
 * can do where the status says it: a deadline that passed is --timeout's
 * (baton run and baton bench both take it), or the server's own frame
 * deadline when it stopped waiting for the rest of a request (its error
 * frame says E_TIMEOUT too, and the client cannot tell the two apart), on a
 * line of its own. Returns 1. */
int stage_fail(struct run *r, const struct stage_rt *s, const char *what, int rc)
{
    stage_msg(r, "stage %u (%s): %s failed: %s (%s)%s\n", s->index + 1, s->endpoint, what,
              baton_status_name(rc), baton_status_str(rc), status_hint(r, rc));
    if (rc == BATON_E_TIMEOUT)
        stage_msg(r,
                  "stage %u (%s) timed out: either it did not answer within --timeout %d ms "
                  "(the deadline of every server call; a larger --timeout gives a slow server "
                  "more time), or it stopped waiting for the rest of a request this side was "
                  "still sending (its frame deadline, policy frame_timeout, default 10s: a "
                  "slow link needs a larger one)\n",
                  s->index + 1, s->endpoint, r->cfg->timeout_ms);
    return 1;
}

const char *baton_run_connect_hint(int rc, int tcp, int os_err, int have_key, int server_auth)
{
    /* a connection taken and then closed or reset with no HELLO reply
     * (during the handshake, or already as the TCP connection opened):
     * not a batond, or one that was stopping */
    if (rc == BATON_E_IO && (!tcp || os_err == ECONNRESET))
        return "; the connection closed during the handshake: is it a batond port (or a "
               "batond that was stopping)?";
    if (tcp)
        return rc == BATON_E_IO ? "; is batond running and listening there?" : "";
    /* its first bytes were not a batond HELLO reply */
    if (rc == BATON_E_PROTO || rc == BATON_E_MAGIC || rc == BATON_E_CMD)
        return "; what answered there does not speak batond's protocol: is it a batond port?";
    /* the refusal frame of the server's lobby (src/server/lobby.c) */
    if (rc == BATON_E_LIMIT)
        return "; the server is at its connection limit (batond --max-connections, or the "
               "max_connections of this client key's client line), or newer connections "
               "still in their handshake pushed this one out of its lobby "
               "(--max-unauthenticated, --max-unauthenticated-per-ip); batond --print-policy "
               "shows them";
    if (rc != BATON_E_AUTH)
        return "";
    if (!have_key)
        return "; the server requires a key: give --key FILE or BATON_KEY_FILE";
    if (server_auth == 0)
        return have_key == 2 ? "; the server was started without a key and takes no client "
                               "key: unset BATON_KEY_FILE, or start it with --key FILE"
                             : "; the server was started without a key and takes no client "
                               "key: drop --key (and BATON_KEY_FILE), or start it with --key "
                               "FILE";
    if (have_key == 2)
        return server_auth == 1 ? "; the server has other keys: the one BATON_KEY_FILE names is "
                                  "not its --key nor one of its client keys"
                                : "; the server has another key than the one BATON_KEY_FILE "
                                  "names, or requires none";
    return server_auth == 1 ? "; the server has other keys: yours is not its --key nor one of "
                              "its client keys"
                            : "; the server has another key, or requires none";
}

/* "PROG: stage i (ENDPOINT): connect failed: E_X (text)" with the hint of
 * the phase that failed (baton_run_connect_hint), or "... connect failed:
 * the host name does not resolve". text is the system's reason
 * (strerror(os_err), e.g. "Connection refused") where os_err is nonzero,
 * else the status's. Returns 1. */
int connect_fail(struct run *r, const struct stage_rt *s, int rc, int tcp, int os_err,
                 int server_auth)
{
    if (tcp && rc == BATON_E_INVAL)
        stage_msg(r, "stage %u (%s): connect failed: the host name does not resolve\n",
                  s->index + 1, s->endpoint);
    else
        stage_msg(r, "stage %u (%s): connect failed: %s (%s)%s\n", s->index + 1, s->endpoint,
                  baton_status_name(rc), os_err ? strerror(os_err) : baton_status_str(rc),
                  baton_run_connect_hint(rc, tcp, os_err, run_key_from(r), server_auth));
    if (rc == BATON_E_TIMEOUT && tcp)
        stage_msg(r,
                  "stage %u (%s) timed out: no TCP connection within --timeout %d ms: is the "
                  "host up and the port open?\n",
                  s->index + 1, s->endpoint, r->cfg->timeout_ms);
    else if (rc == BATON_E_TIMEOUT)
        stage_msg(r,
                  "stage %u (%s) timed out: it took the TCP connection but sent no batond "
                  "HELLO reply within --timeout %d ms: is it a batond port? (a busy batond "
                  "gets more time from a larger --timeout)\n",
                  s->index + 1, s->endpoint, r->cfg->timeout_ms);
    return 1;
}

/* After a refused ALLOC_BUFFER of a stage's weights (the session's first
 * buffer): the bytes asked for and the server limits that apply, where the
 * status says it is memory (server: cmd_alloc_buffer, handles.c). E_LIMIT:
 * more than the server's memory for all sessions (total_memory_bytes), or
 * its table of buffers is full, which is not the size's fault and gets no
 * hint; E_QUOTA: more than one session may hold (session_memory_bytes) or
 * than is free of the total now. info: the stage's DEVICE_INFO, from just
 * before. In-process stages have no batond flags to name. */
void weights_alloc_hint(struct run *r, const struct stage_rt *s,
                               const struct baton_device_info *info, int rc)
{
    const uint32_t n_layers = s->st.layer_end - s->st.layer_begin;
    const char *const total_flag = run_limit_flag(r, " (batond --total-memory-bytes)");
    const char *const session_flag = run_limit_flag(r, " (batond --session-memory-bytes)");
    const char *const see = run_limit_flag(r, "; batond --print-policy shows the server's limits");
    char want[32], total[32], session[32], free_now[32];

    run_format_bytes(want, sizeof want, s->weights_bytes);
    run_format_bytes(total, sizeof total, info->total_memory);
    run_format_bytes(session, sizeof session, info->max_buffer_bytes);
    run_format_bytes(free_now, sizeof free_now, info->free_memory);
    if (rc == BATON_E_LIMIT && s->weights_bytes > info->total_memory)
        stage_msg(r,
                  "stage %u needs %s (%" PRIu64
                  " bytes, which the server rounds up to whole pages) for the weights of its "
                  "%u layer%s, more than the server's memory for all sessions, %s%s; fewer "
                  "layers on the stage (--split) need less%s\n",
                  s->index + 1, want, s->weights_bytes, n_layers, n_layers == 1 ? "" : "s", total,
                  total_flag, see);
    else if (rc == BATON_E_QUOTA)
        stage_msg(r,
                  "stage %u needs %s (%" PRIu64
                  " bytes, which the server rounds up to whole pages) for the weights of its "
                  "%u layer%s; the server allows one session at most %s%s and had %s free of %s "
                  "for all sessions%s; fewer layers on the stage (--split) need less%s\n",
                  s->index + 1, want, s->weights_bytes, n_layers, n_layers == 1 ? "" : "s",
                  session, session_flag, free_now, total, total_flag, see);
}

const char *run_limit_flag(const struct run *r, const char *flag_text)
{
    return r->local ? "" : flag_text;
}

const char *run_graphs_limit(const struct run *r)
{
    return r->local ? "32 for the in-process stages"
                    : "batond --max-graphs-per-session, default 32";
}

const char *run_seq_flag(const struct baton_run_config *cfg)
{
    return cfg->prog && strcmp(cfg->prog, "baton bench") == 0 ? "--npl" : "--parallel";
}

/* A step on stage s refused by a server limit. The ATTENTION work area is
 * what grows past the scratch limit: min(heads x tokens, 64) rows of every
 * KV-cache cell (baton_attention_work_bytes), and the cells are --ctx x the
 * sequences at a time, so a run with --parallel reaches it at a --ctx that
 * alone would fit. When the stage's largest step asks more than the
 * server's scratch limit (BATON_SCRATCH_LIMIT_BYTES), that is said with the
 * figures; otherwise what grows with what, and where the limits are. */
void step_limit_hint(struct run *r, const struct stage_rt *s, int rc)
{
    const struct baton_llama_hparams *hp = &r->hp;
    uint32_t nt = 0;
    uint64_t work = 0;
    char ctx[RUN_CTX_NAME_CAP], many[64] = "", size[32], limit[32];

    if (rc != BATON_E_LIMIT && rc != BATON_E_QUOTA)
        return;
    run_ctx_name(r->cfg, ctx, sizeof ctx);
    if (r->n_seq > 1)
        snprintf(many, sizeof many, " x %u sequences at a time (%s)", r->n_seq,
                 run_seq_flag(r->cfg));
    for (uint32_t g = 0; s != NULL && g < s->n_graphs; g++)
        if (s->graphs[g].n_tokens > nt)
            nt = s->graphs[g].n_tokens;
    if (s != NULL && s->n_graphs == 0) /* before registration: the largest step */
        nt = r->n_tok_max;
    if (s != NULL && s->st.layer_end > s->st.layer_begin && nt > 0)
        work = baton_attention_work_bytes(hp->head_dim, hp->n_head, nt, r->n_cells,
                                          r->cfg->kv_type == BATON_TYPE_F16);
    run_format_bytes(limit, sizeof limit, BATON_SCRATCH_LIMIT_BYTES);
    if (rc == BATON_E_LIMIT && work > BATON_SCRATCH_LIMIT_BYTES) {
        const uint64_t rows = (uint64_t)hp->n_head * nt < BATON_POOL_MAX_THREADS
                                  ? (uint64_t)hp->n_head * nt
                                  : BATON_POOL_MAX_THREADS;

        run_format_bytes(size, sizeof size, work);
        stage_msg(r,
                  "stage %u's step of %u token%s needs more scratch than the server's limit "
                  "of %s per session (fixed; the server's total memory where that is less): "
                  "its ATTENTION work area alone is %" PRIu64 " rows (%u heads x %u tokens, "
                  "at most %u) x %u KV-cache cells x 4 bytes = %s, the cells being %s%s; a "
                  "smaller --ctx%s%s%s needs less\n",
                  s->index + 1, nt, nt == 1 ? "" : "s", limit, rows, hp->n_head, nt,
                  BATON_POOL_MAX_THREADS, r->n_cells, size, ctx, many,
                  r->n_seq > 1 ? " or " : "", r->n_seq > 1 ? run_seq_flag(r->cfg) : "",
                  nt > r->n_seq ? " or --ubatch (the prefill steps' tokens)" : "");
    } else {
        char ub[96];

        run_ubatch_name(r, ub, sizeof ub);
        stage_msg(r,
                  "a step's scratch and compute on the server grow with the KV-cache cells "
                  "(%s%s) and the tokens of a step (%s%s), its nodes with the stage's "
                  "layers (--split); the scratch arena is at most %s per session (fixed)%s%s%s; "
                  "%s (session_memory_bytes, max_graph_flops, max_graph_nodes)\n",
                  ctx, many, ub,
                  r->n_seq > 1 ? ", or one token per sequence in a decode step" : "", limit,
                  rc == BATON_E_QUOTA ? " and shares the session's memory" : "",
                  rc == BATON_E_QUOTA ? run_limit_flag(r, " (batond --session-memory-bytes)") : "",
                  rc == BATON_E_QUOTA ? " with the stage's weights and KV cache" : "",
                  r->local ? "the in-process stages run with batond's default limits, which "
                             "batond --print-policy prints"
                           : "batond --print-policy shows the server's other limits");
    }
    /* the session's memory: what its buffers hold of it, the rest being
     * the graphs' and the scratch arena's */
    if (rc == BATON_E_QUOTA && s != NULL && s->session_limit != 0) {
        char w[32], kv[32], io[32], lim[32];

        run_format_bytes(w, sizeof w, s->weights_bytes);
        run_format_bytes(kv, sizeof kv, s->kv_bytes);
        run_format_bytes(io, sizeof io, s->io_bytes);
        run_format_bytes(lim, sizeof lim, s->session_limit);
        stage_msg(r,
                  "stage %u's session holds %s of weights, %s of KV cache and %s of I/O "
                  "buffers of the %s %s; its registered graphs and a step's scratch arena "
                  "need more than the rest, or than other sessions leave free of the "
                  "server's memory\n",
                  s->index + 1, w, kv, io, lim,
                  r->local ? "the in-process stages allow one session"
                           : "the server allows one session");
    }
    /* not after the scratch figures above, nor for a quota: neither is the
     * message's size */
    if (r->n_stages > 1 && rc == BATON_E_LIMIT && work <= BATON_SCRATCH_LIMIT_BYTES)
        stage_msg(r,
                  "in a split run a ubatch's hidden state (%" PRIu64
                  " bytes) also goes in one message, which must fit the server's "
                  "max message size%s\n",
                  run_hidden_state_bytes(r), run_limit_flag(r, " (batond --max-message-bytes)"));
}

const char *run_outcome_name(uint32_t outcome)
{
    static const char *const names[BATON_COPY_OUTCOME_LIMIT] = {
        "done", "destination not on the source's allow-list", "destination in backoff",
        "connect failed", "handshake failed (or no peer support)", "refused by the destination",
        "peer link failed", "no peer link available", "queued",
        "cancelled (the source's step failed)"};

    return outcome < BATON_COPY_OUTCOME_LIMIT ? names[outcome] : "?";
}
