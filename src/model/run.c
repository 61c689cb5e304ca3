/* The coordinator's run (see run.h and run_internal.h for its parts):
 * tokenize, plan, connect, upload, prefill in ubatches, decode token by
 * token, summary. */
#include "model/run.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "auth/auth.h"
#include "baton/client.h"
#include "baton/status.h"
#include "model/gguf.h"
#include "model/llama.h"
#include "model/run_internal.h"
#include "model/split.h"
#include "model/tokenizer.h"
#include "server/server.h"

/* Difference between the largest and second-largest logit. */
static double top2_gap(const float *v, size_t n)
{
    double a = -INFINITY, b = -INFINITY;
    size_t i;

    for (i = 0; i < n; i++) {
        if (v[i] > a) {
            b = a;
            a = v[i];
        } else if (v[i] > b) {
            b = v[i];
        }
    }
    return a - b;
}

void baton_run_config_default(struct baton_run_config *cfg)
{
    memset(cfg, 0, sizeof(*cfg));
    cfg->servers = "local";
    cfg->n_predict = 64;
    cfg->n_ctx = 512;
    cfg->ctx_origin = BATON_CTX_DEFAULT;
    cfg->n_ubatch = 0; /* auto: baton_run_default_ubatch */
    cfg->pipeline = 1;
    cfg->n_slots = 2;
    cfg->kv_type = BATON_TYPE_F32;
    cfg->top_p = 1.0f;
    cfg->n_threads = 1;
    cfg->timeout_ms = 30000;
    cfg->p2p = 1;
    cfg->ring = 1;
    cfg->continuous = 0; /* opt-in: see run.h */
    cfg->chat_fd = -1;
    cfg->keepalive_s = 30;
    cfg->out = stdout;
    cfg->log = stderr;
    cfg->prog = "baton";
}

void baton_run_config_env(struct baton_run_config *cfg, const char **servers_name)
{
    const char *servers = getenv("BATON_SERVERS"), *key = getenv("BATON_KEY_FILE");

    if (servers && *servers) {
        cfg->servers = servers;
        *servers_name = "BATON_SERVERS";
    }
    if (key && *key) {
        cfg->key_path = key;
        cfg->key_name = "BATON_KEY_FILE";
    }
}

uint32_t baton_run_default_ubatch(uint32_t n_prompt, uint32_t n_stages, int pipeline)
{
    uint32_t u;

    if (n_stages <= 1 || !pipeline)
        return 512;
    /* about four ubatches per stage in flight over the prompt, so the
     * pipeline's fill and drain cost little; at least 32 tokens (the
     * kernels' efficiency), at most 512 */
    u = (uint32_t)(((uint64_t)n_prompt + 4ull * n_stages - 1) / (4ull * n_stages));
    return u < 32 ? 32 : u > 512 ? 512 : u;
}

int run_tokenize_text(struct run *r, const char *text, size_t len, unsigned flags,
                      const struct baton_chat_prompt *chat, int32_t **ids, size_t *n_ids)
{
    size_t cap = len + 8; /* enough for most vocabularies: one try */
    int rc;

    for (int pass = 0; pass < 2; pass++) {
        *ids = calloc(cap, sizeof(**ids));
        if (*ids == NULL)
            return BATON_E_NOMEM;
        rc = chat ? baton_tokenize_spans(r->tok, text, len, flags, chat->spans, chat->n_spans,
                                         *ids, cap, n_ids)
                  : baton_tokenize_ex(r->tok, text, len, flags, *ids, cap, n_ids);
        if (rc == 0)
            return 0;
        free(*ids);
        *ids = NULL;
        if (rc != BATON_E_LIMIT || *n_ids <= cap)
            return rc;
        cap = *n_ids; /* the whole count, which baton_tokenize reports */
    }
    return rc;
}

int run_tokenize_prompt(struct run *r, size_t which, const char *text, size_t len,
                        int32_t **ids, size_t *n_ids)
{
    const struct baton_chat_prompt *chat = r->chat && which < r->n_chat ? &r->chat[which] : NULL;
    const unsigned bos = baton_tokenizer_add_bos(r->tok) ? BATON_TOKENIZE_ADD_BOS : 0u;

    return run_tokenize_text(r, text, len, bos, chat, ids, n_ids);
}

/* The prompt's token ids: cfg->prompt_ids, or the tokenized text. Returns
 * 0, or the exit code after a message (2: a usage error). */
static int prompt_tokens(struct run *r, int32_t **ids, size_t *n_ids)
{
    const struct baton_run_config *cfg = r->cfg;
    size_t len = cfg->prompt ? strlen(cfg->prompt) : 0, i;
    int rc;

    if (cfg->prompt_ids) {
        *ids = calloc(cfg->n_prompt_ids ? cfg->n_prompt_ids : 1, sizeof(**ids));
        if (*ids == NULL) {
            run_msg(cfg, "out of memory\n");
            return 1;
        }
        memcpy(*ids, cfg->prompt_ids, cfg->n_prompt_ids * sizeof(**ids));
        *n_ids = cfg->n_prompt_ids;
        for (i = 0; i < *n_ids; i++) {
            if ((*ids)[i] < 0 || (uint32_t)(*ids)[i] >= r->hp.n_vocab) {
                run_msg(cfg, "--prompt-ids: id %d is outside the vocabulary of %s (0..%u)\n",
                        (*ids)[i], cfg->model_path, r->hp.n_vocab - 1);
                return 2;
            }
        }
        rc = 0;
    } else {
        if (len > BATON_TOKENIZER_MAX_TEXT_BYTES) { /* baton_tokenize's E_LIMIT, said as such */
            run_msg(cfg, "the prompt is %zu bytes; the tokenizer takes at most %u bytes (%u MiB)\n",
                    len, BATON_TOKENIZER_MAX_TEXT_BYTES, BATON_TOKENIZER_MAX_TEXT_BYTES >> 20);
            return 2;
        }
        rc = run_tokenize_prompt(r, 0, cfg->prompt, len, ids, n_ids);
        if (rc == BATON_E_NOMEM) {
            run_msg(cfg, "out of memory\n");
            return 1;
        }
    }
    if (rc == 0 && *n_ids == 0) {
        run_msg(cfg, "the prompt gives no tokens (and the model has no BOS)\n");
        return 2;
    }
    if (rc != 0) {
        run_msg(cfg, "cannot tokenize the prompt: %s\n", baton_status_str(rc));
        return 1;
    }
    if ((uint64_t)*n_ids + cfg->n_predict > cfg->n_ctx) {
        const unsigned long long need = (unsigned long long)*n_ids + cfg->n_predict;
        char hint[RUN_CTX_HINT_CAP];

        run_ctx_hint(r, need, hint, sizeof hint);
        run_msg(cfg, "prompt (%zu token%s) + -n %u = %llu exceeds %s %u%s; %s\n", *n_ids,
                *n_ids == 1 ? "" : "s", cfg->n_predict, need,
                cfg->ctx_origin == BATON_CTX_DEFAULT ? "the default --ctx"
                : cfg->ctx_origin == BATON_CTX_BENCH ? "a KV cache of"
                                                     : "the context --ctx",
                cfg->n_ctx, cfg->ctx_origin == BATON_CTX_BENCH ? " positions" : "", hint);
        return 2;
    }
    return 0;
}

/* The layer plan: counts[] per stage, checked against what a KV cache can
 * be. Returns 0 or 2 after a message. */
static int plan_layers(struct run *r, const double *props, int n_parts, uint32_t *counts)
{
    const struct baton_run_config *cfg = r->cfg;

    if (baton_split_plan(r->hp.n_layer, props, (size_t)n_parts, counts) != 0) {
        run_msg(cfg, "cannot split %u layer%s into %d stages with --split %s: %s\n",
                r->hp.n_layer, r->hp.n_layer == 1 ? "" : "s", n_parts,
                cfg->split ? cfg->split : "(default)",
                (uint32_t)n_parts > r->hp.n_layer
                    ? (strcmp(cfg->servers, "local") == 0
                           ? "more stages than layers (give at most one stage per layer)"
                           : "more stages than layers (give at most one server per layer)")
                    : "the proportions leave a stage without a layer (give each stage a "
                      "larger share)");
        return 2;
    }
    /* a KV cache no machine could hold is a usage error, found before any
     * connection; whether a server grants the rest is known at its upload */
    for (int i = 0; i < n_parts; i++) {
        uint64_t kv_bytes;

        if (baton_run_kv_cache_bytes(r->hp.head_dim, r->hp.n_head_kv, r->n_cells, counts[i],
                                     cfg->kv_type == BATON_TYPE_F16 ? 2 : 4, &kv_bytes) != 0) {
            char ctx[RUN_CTX_NAME_CAP];

            run_ctx_name(cfg, ctx, sizeof ctx);
            run_msg(cfg, "%s needs more than 2^64 bytes of KV cache on stage %d (%u layers)\n",
                    ctx, i + 1, counts[i]);
            return 2;
        }
    }
    return 0;
}

void run_sample_params_of(float temp, float top_p, uint32_t top_k, uint64_t seed,
                          uint32_t counter, int32_t p[6])
{
    memcpy(&p[0], &temp, 4);
    memcpy(&p[1], &top_p, 4);
    p[2] = (int32_t)top_k;
    p[3] = (int32_t)(uint32_t)seed;
    p[4] = (int32_t)(uint32_t)(seed >> 32);
    p[5] = (int32_t)counter;
}

void run_sample_params(const struct baton_run_config *cfg, uint64_t seed, uint32_t counter,
                       int32_t p[6])
{
    run_sample_params_of(cfg->temp, cfg->top_p, cfg->top_k, seed, counter, p);
}

/* A step list of m ubatches (zeroed) and SAMPLE's parameters for each
 * (6 words a step). 0, or 1 after "out of memory" (nothing allocated). */
static int alloc_steps(struct run *r, uint32_t m, struct run_ubatch **ub, int32_t **sp)
{
    *ub = calloc(m ? m : 1, sizeof(**ub));
    *sp = calloc((size_t)(m ? m : 1) * 6, sizeof(**sp));
    if (*ub == NULL || *sp == NULL) {
        free(*ub);
        free(*sp);
        stage_msg(r, "out of memory\n");
        return 1;
    }
    return 0;
}

/* Appends the logits of the step just run to cfg->logits_path (when set).
 * Returns 0, or 1 after a message. */
static int put_logits(struct run *r)
{
    if (!r->logits_out)
        return 0;
    if (fwrite(r->logits, sizeof(float), r->hp.n_vocab, r->logits_out) != r->hp.n_vocab) {
        run_msg(r->cfg, "--logits-out %s: cannot write: %s\n", r->cfg->logits_path,
                strerror(errno));
        return 1;
    }
    return 0;
}

/* The prompt in ubatches of r->n_ubatch through the engine; *next gets the
 * first generated token (sampled on the last stage when cfg->temp > 0, with
 * the position of each ubatch's last token as the counter). */
static int prefill(struct run *r, const int32_t *ids, size_t n_ids, int32_t *next)
{
    const uint32_t u = r->n_ubatch;
    const uint32_t m = (uint32_t)((n_ids + u - 1) / u);
    struct run_ubatch *ub;
    int32_t *sp;
    uint32_t k;
    int rc;

    if (alloc_steps(r, m, &ub, &sp) != 0)
        return 1;
    for (k = 0; k < m; k++) {
        ub[k].tokens = ids + (size_t)k * u;
        ub[k].pos0 = k * u;
        ub[k].n = (uint32_t)(n_ids - (size_t)k * u < u ? n_ids - (size_t)k * u : u);
        run_sample_params(r->cfg, r->cfg->seed, ub[k].pos0 + ub[k].n - 1, sp + 6 * k);
        ub[k].sample = r->sampling ? sp + 6 * k : NULL;
    }
    rc = run_engine(r, ub, m, next);
    free(ub);
    free(sp);
    if (rc != 0)
        return 1;
    if (r->cfg->report_gap)
        r->min_gap = top2_gap(r->logits, r->hp.n_vocab);
    return put_logits(r);
}

/* The statistics window of the decode steps begins (peer counters read
 * first, outside the window's command counts) or ends. */
void run_stats_window(struct run *r, int begin)
{
    for (uint32_t i = 0; i < r->n_stages; i++) {
        struct stage_rt *s = &r->stages[i];
        uint64_t sent, received;

        if (begin) {
            if (r->cfg->stats || r->cfg->stats_json)
                s->peer_ok = run_query_peer(s, &s->peer_sent0, &s->peer_recv0) == 0;
            baton_conn_reset_stats(s->conn);
            s->copies_done = s->copies_not_done = s->hidden_gets = s->hidden_sets = 0;
            continue;
        }
        for (uint32_t c = 1; c < BATON_CMD_LIMIT; c++)
            s->cmd[c] = baton_conn_stats(s->conn, c);
        if (s->peer_ok && run_query_peer(s, &sent, &received) == 0) {
            s->peer_sent = sent - s->peer_sent0;
            s->peer_recv = received - s->peer_recv0;
        } else {
            s->peer_ok = 0;
        }
    }
    if (begin) {
        r->hidden_bytes_hub = r->token_bytes = r->logits_bytes = 0;
        r->waits = r->redos = 0;
    }
}

/* Streams the text of token id (after prev) to cfg->out. 0, or 1 after a
 * message when the text could not be written (run_flush_out). */
static int stream_token(struct run *r, int32_t id, int32_t prev)
{
    char piece[256];
    size_t plen = 0;

    if (r->cfg->quiet)
        return 0;
    if (baton_token_to_piece(r->tok, id, prev, piece, sizeof(piece), &plen) == 0 && plen > 0) {
        fwrite(piece, 1, plen, r->cfg->out);
        r->text_open = 1;
    }
    return run_flush_text(r);
}

/* Takes a generated token: checked, kept in gen, streamed. Returns 1 when
 * decoding ends with it (EOS, -n, or -1: a token outside the vocabulary,
 * or text that could not be written, said), else 0. */
static int take_token(struct run *r, const int32_t *prompt, size_t n_prompt, int32_t next,
                      int32_t *gen, size_t *n_gen)
{
    const struct baton_run_config *cfg = r->cfg;

    if (next < 0 || (uint32_t)next >= r->hp.n_vocab) {
        stage_msg(r, "stage %u returned token id %d outside the vocabulary\n", r->n_stages, next);
        return -1;
    }
    gen[(*n_gen)++] = next;
    if (baton_tokenizer_is_eog(r->tok, next) && !cfg->ignore_eos)
        return 1;
    if (stream_token(r, next, *n_gen >= 2 ? gen[*n_gen - 2] : prompt[n_prompt - 1]) != 0)
        return -1;
    return *n_gen == cfg->n_predict;
}

/* The decode ring's state for its on_token callback. */
struct ring_decode {
    const int32_t *prompt;
    size_t n_prompt;
    int32_t *gen;
    size_t *n_gen;
    int failed;
};

static int ring_on_token(struct run *r, int32_t token)
{
    struct ring_decode *d = r->on_token_arg;
    int rc = take_token(r, d->prompt, d->n_prompt, token, d->gen, d->n_gen);

    if (rc < 0)
        d->failed = 1;
    return rc != 0;
}

/* Decode with the ring (r->bounds[n_stages - 1] set up, greedy): the
 * first token from the prefill, then every step queued ahead, each taking
 * its token from the step before straight from the last stage; the engine
 * hands each step's token to take_token as it comes. */
static int decode_ring(struct run *r, const int32_t *prompt, size_t n_prompt, int32_t next,
                       int32_t *gen, size_t *n_gen)
{
    struct ring_decode d = {prompt, n_prompt, gen, n_gen, 0};
    struct run_ubatch *ub;
    int32_t *sp;
    uint32_t m, k;
    int rc = take_token(r, prompt, n_prompt, next, gen, n_gen);

    if (rc != 0)
        return rc < 0;
    m = (uint32_t)(r->cfg->n_predict - *n_gen);
    if (alloc_steps(r, m, &ub, &sp) != 0)
        return 1;
    for (k = 0; k < m; k++) {
        ub[k].tokens = k == 0 ? &gen[*n_gen - 1] : NULL;
        ub[k].n = 1;
        ub[k].pos0 = (uint32_t)(n_prompt + *n_gen - 1 + k);
        run_sample_params(r->cfg, r->cfg->seed, ub[k].pos0, sp + 6 * k);
        ub[k].sample = r->sampling ? sp + 6 * k : NULL;
    }
    r->on_token = ring_on_token;
    r->on_token_arg = &d;
    rc = run_engine(r, ub, m, &next);
    r->on_token = NULL;
    r->on_token_arg = NULL;
    free(ub);
    free(sp);
    return rc != 0 || d.failed;
}

/* Decode: the first token from the prefill, then one step per token until
 * -n or EOS. gen[0..*n_gen) gets the tokens. */
static int decode(struct run *r, const int32_t *prompt, size_t n_prompt, int32_t next,
                  int32_t *gen, size_t *n_gen)
{
    const struct baton_run_config *cfg = r->cfg;

    if (r->n_stages >= 2 && r->bounds[r->n_stages - 1].direct)
        return decode_ring(r, prompt, n_prompt, next, gen, n_gen);
    while (*n_gen < cfg->n_predict) {
        struct run_ubatch ub;
        int32_t cur, sp[6];

        if (next < 0 || (uint32_t)next >= r->hp.n_vocab) {
            stage_msg(r, "stage %u returned token id %d outside the vocabulary\n", r->n_stages,
                      next);
            return 1;
        }
        gen[(*n_gen)++] = next;
        if (baton_tokenizer_is_eog(r->tok, next) && !cfg->ignore_eos)
            break;
        if (stream_token(r, next, *n_gen >= 2 ? gen[*n_gen - 2] : prompt[n_prompt - 1]) != 0)
            return 1;
        if (*n_gen == cfg->n_predict)
            break;
        cur = next;
        memset(&ub, 0, sizeof ub);
        run_sample_params(cfg, cfg->seed, (uint32_t)(n_prompt + *n_gen - 1), sp);
        ub.sample = r->sampling ? sp : NULL;
        ub.tokens = &cur;
        ub.n = 1;
        ub.pos0 = (uint32_t)(n_prompt + *n_gen - 1);
        if (run_engine(r, &ub, 1, &next) != 0 || put_logits(r) != 0)
            return 1;
        if (cfg->report_gap) {
            double gap = top2_gap(r->logits, r->hp.n_vocab);

            if (gap < r->min_gap)
                r->min_gap = gap;
        }
    }
    return 0;
}

static void fill_result(struct run *r, size_t n_prompt, size_t n_gen, double t_load,
                        double t_prefill, double t_decode, uint32_t decode_steps)
{
    struct baton_run_result *res = r->cfg->result;

    memset(res, 0, sizeof(*res));
    res->n_prompt = n_prompt;
    res->n_gen = n_gen;
    res->t_load_s = t_load;
    res->t_prefill_s = t_prefill;
    res->t_decode_s = t_decode;
    res->n_stages = r->n_stages;
    res->n_ubatch = r->n_ubatch;
    res->decode_steps = decode_steps;
    for (uint32_t i = 0; i < r->n_stages; i++) {
        const struct stage_rt *s = &r->stages[i];

        for (uint32_t c = 1; c < BATON_CMD_LIMIT; c++)
            res->cmd[i][c] = s->cmd[c];
        res->copies_done[i] = s->copies_done;
        res->copies_not_done[i] = s->copies_not_done;
        res->hidden_gets[i] = s->hidden_gets;
        res->hidden_sets[i] = s->hidden_sets;
        res->peer_stats_ok[i] = s->peer_ok;
        res->peer_bytes_sent[i] = s->peer_sent;
        res->peer_bytes_received[i] = s->peer_recv;
    }
    res->hidden_bytes_hub = r->hidden_bytes_hub;
    res->token_bytes = r->token_bytes;
    res->logits_bytes = r->logits_bytes;
    res->waits = r->waits;
    res->redos = r->redos;
    res->n_direct = r->n_direct;
    res->ring = r->ring_tokens > 0;
}

/* Allocates the stages, boundaries and host buffers, places the layers and
 * prints the model and plan lines. 0 or 1. */
static int make_stages(struct run *r, const uint32_t *counts)
{
    const struct baton_run_config *cfg = r->cfg;
    uint32_t i, layer = 0;

    r->stages = calloc(r->n_stages, sizeof(*r->stages));
    r->bounds = calloc(r->n_stages, sizeof(*r->bounds));
    r->logits = calloc(r->hp.n_vocab, sizeof(float));
    if (!r->stages || !r->bounds || !r->logits) {
        run_msg(cfg, "out of memory\n");
        return 1;
    }
    for (i = 0; i + 1 < r->n_stages; i++) {
        for (uint32_t k = 0; k < r->n_slots; k++) {
            r->bounds[i].host[k] = calloc((size_t)r->hp.n_embd * r->n_tok_max, sizeof(float));
            if (r->bounds[i].host[k] == NULL) {
                run_msg(cfg, "out of memory\n");
                return 1;
            }
        }
    }
    fprintf(cfg->log,
            "model: %s: %s, %u layer%s, n_embd %u, %u heads (%u kv), n_ff %u, vocab %u (%s%s%s)\n",
            cfg->model_path, baton_llama_arch_name(r->hp.arch), r->hp.n_layer,
            r->hp.n_layer == 1 ? "" : "s", r->hp.n_embd, r->hp.n_head, r->hp.n_head_kv,
            r->hp.n_ff, r->hp.n_vocab,
            baton_tokenizer_is_bpe(r->tok) ? "BPE, pre-tokenizer " : "SentencePiece",
            baton_tokenizer_pre(r->tok, NULL), baton_tokenizer_add_bos(r->tok) ? ", BOS" : "");
    for (i = 0; i < r->n_stages; i++) {
        struct baton_llama_stage *st = &r->stages[i].st;

        st->layer_begin = layer;
        st->layer_end = layer + counts[i];
        st->first = i == 0;
        st->last = i + 1 == r->n_stages;
        st->seqs = r->seqs;
        st->sample = r->sampling && st->last;
        layer += counts[i];
    }
    return 0;
}

static void free_run(struct run *r)
{
    if (r->stages) {
        for (uint32_t i = 0; i < r->n_stages; i++) {
            struct stage_rt *s = &r->stages[i];

            if (s->conn)
                baton_conn_close(s->conn);
            free(s->st.layers);
            free(s->items);
            free(s->leaves);
            free(s->nodes);
        }
    }
    if (r->bounds)
        for (uint32_t i = 0; i < r->n_stages; i++)
            for (uint32_t k = 0; k < BATON_LLAMA_MAX_SLOTS; k++)
                free(r->bounds[i].host[k]);
    if (r->local)
        baton_server_destroy(r->local);
    baton_key_free(r->key);
    free(r->stages);
    free(r->bounds);
    free(r->logits);
    for (size_t i = 0; i < r->n_chat; i++)
        baton_chat_prompt_free(&r->chat[i]);
    free(r->chat);
    free(r->chat_texts);
    baton_tokenizer_free(r->tok);
    baton_gguf_close(r->gguf);
}

/* cfg->chat: lays out the prompt (or each of cfg->prompts) with the chat
 * template cfg->chat_template names, or else the one the model's
 * tokenizer.chat_template is recognized as, into r->chat, and *copy as cfg
 * naming those texts. 0, or the exit code after a message. */
static int run_chat_prepare(struct run *r, struct baton_run_config *copy)
{
    const struct baton_run_config *cfg = r->cfg;
    enum baton_chat_template t;
    size_t n = cfg->prompts ? cfg->n_prompts : 1;
    char err[512];

    if (baton_chat_template_for(r->gguf, cfg->chat_template, r->tok, cfg->chat_system != NULL,
                                &t, err, sizeof err) != 0) {
        run_msg(cfg, "%s: %s\n", cfg->model_path, err);
        return 2;
    }
    *copy = *cfg;
    if (cfg->chat_fd >= 0) { /* a conversation: its turns are laid out as they come */
        r->conv = 1;
        r->chat_tmpl = t;
        copy->prompt = NULL;
        fprintf(cfg->log, "chat: template %s (%s), a conversation: one message a line%s\n",
                baton_chat_name(t),
                cfg->chat_template ? "--chat-template" : "the model's tokenizer.chat_template",
                isatty(cfg->chat_fd) ? " (end it with Ctrl-D)" : "");
        return 0;
    }
    r->chat = calloc(n, sizeof(*r->chat));
    r->chat_texts = calloc(n, sizeof(*r->chat_texts));
    if (r->chat == NULL || r->chat_texts == NULL) {
        run_msg(cfg, "out of memory\n");
        return 1;
    }
    r->n_chat = n;
    for (size_t i = 0; i < n; i++) {
        const char *user = cfg->prompts ? cfg->prompts[i] : cfg->prompt;
        int rc = baton_chat_format(t, cfg->chat_system, user, user ? strlen(user) : 0,
                                   &r->chat[i]);

        if (rc == BATON_E_LIMIT) {
            char which[40] = "the prompt";

            if (cfg->prompts)
                snprintf(which, sizeof which, "prompt %zu", i + 1);
            run_msg(cfg, "%s laid out as %s is more than %u bytes (the tokenizer's limit)\n",
                    which, baton_chat_name(t), BATON_TOKENIZER_MAX_TEXT_BYTES);
            return 2;
        }
        if (rc != 0) {
            run_msg(cfg, "cannot lay out the chat prompt: %s\n", baton_status_str(rc));
            return 1;
        }
        r->chat_texts[i] = r->chat[i].text;
    }
    if (cfg->prompts)
        copy->prompts = r->chat_texts;
    else
        copy->prompt = r->chat[0].text;
    fprintf(cfg->log, "chat: template %s (%s)\n", baton_chat_name(t),
            cfg->chat_template ? "--chat-template" : "the model's tokenizer.chat_template");
    return 0;
}

/* baton serve: the prompt tokens a request admitted while others decode
 * adds to each of their steps (continuous batching). A short prompt's
 * chunk is padded to it, and every sequence decoding waits for that step,
 * so it stays small: RUN_SERVE_CHUNK, or the ubatch when that is less. */
static uint32_t serve_chunk(uint32_t n_ubatch)
{
    return n_ubatch < RUN_SERVE_CHUNK ? n_ubatch : RUN_SERVE_CHUNK;
}

int baton_run(const struct baton_run_config *cfg)
{
    struct baton_run_config chat_cfg;
    struct run r;
    char err[512];
    double props[BATON_MAX_STAGES];
    uint32_t counts[BATON_MAX_STAGES];
    int n_parts, rc, ret = 1;
    uint32_t i;
    int32_t *prompt_ids = NULL, *gen_ids = NULL;
    size_t n_prompt = 0, n_gen = 0;
    double t_load0, t_load, t_prefill = 0, t_decode = 0, t0, bytes = 0;
    int32_t next = 0;

    memset(&r, 0, sizeof(r));
    r.cfg = cfg;
    t_load0 = run_now_s();
    if (cfg->n_ctx == 0) {
        run_msg(cfg, "--ctx and --ubatch must be at least 1\n");
        return 2;
    }
    if (cfg->n_slots < 1 || cfg->n_slots > BATON_LLAMA_MAX_SLOTS) {
        run_msg(cfg, "--slots must be 1..%u\n", BATON_LLAMA_MAX_SLOTS);
        return 2;
    }
    /* the stage list and split before the model is read: a typo there is
     * found at once, not after loading */
    n_parts = run_plan_parts(cfg, "--servers", props);
    if (n_parts < 0)
        return 2;
    rc = baton_gguf_open(cfg->model_path, &r.gguf, err, sizeof(err));
    if (rc != 0) {
        run_msg(cfg, "%s\n", err);
        return 1;
    }
    rc = baton_llama_hparams_load(r.gguf, &r.hp, err, sizeof(err));
    if (rc == 0)
        rc = baton_tokenizer_from_gguf(r.gguf, &r.tok, err, sizeof(err));
    if (rc != 0) {
        run_msg(cfg, "%s: %s\n", cfg->model_path, err);
        goto out;
    }
    if (baton_tokenizer_pre_warning(r.tok) != NULL)
        run_msg(cfg, "warning: %s: %s\n", cfg->model_path, baton_tokenizer_pre_warning(r.tok));
    if (cfg->chat_fd >= 0 && (!cfg->chat || cfg->prompt_ids || cfg->prompts || cfg->n_copies ||
                              cfg->logits_path || cfg->report_gap)) {
        run_msg(cfg, "a conversation needs --chat, and is one sequence of text: not with "
                     "--prompt-ids, --prompt-file, --logits-out or --report-gap\n");
        ret = 2;
        goto out;
    }
    r.serve = cfg->serve != NULL;
    if (r.serve && (cfg->prompt_ids || cfg->prompts || cfg->n_copies || cfg->chat_fd >= 0 ||
                    cfg->logits_path || cfg->report_gap || cfg->ids_path || cfg->stats ||
                    cfg->stats_json || cfg->n_predict < 2)) {
        run_msg(cfg, "baton serve takes its prompts from HTTP requests, and replies of up to "
                     "-n tokens (at least 2): not with prompts, conversations or output "
                     "files\n");
        ret = 2;
        goto out;
    }
    if (r.serve) { /* chat requests need a template: the model's, or --chat-template */
        char terr[512];

        r.chat_ok = baton_chat_template_for(r.gguf, cfg->chat_template, r.tok, 0, &r.chat_tmpl,
                                            terr, sizeof terr) == 0;
        if (r.chat_ok)
            fprintf(cfg->log, "chat: template %s (%s) for /v1/chat/completions\n",
                    baton_chat_name(r.chat_tmpl),
                    cfg->chat_template ? "--chat-template" : "the model's tokenizer.chat_template");
        else if (cfg->chat_template) {
            run_msg(cfg, "%s: %s\n", cfg->model_path, terr);
            ret = 2;
            goto out;
        } else
            fprintf(cfg->log, "chat: no /v1/chat/completions: %s\n", terr);
    }
    if (cfg->chat) { /* from here on the prompts are the laid-out texts */
        rc = run_chat_prepare(&r, &chat_cfg);
        if (rc != 0) {
            ret = rc;
            goto out;
        }
        cfg = r.cfg = &chat_cfg;
    }
    gen_ids = calloc((size_t)cfg->n_predict + 1, sizeof(*gen_ids));
    if (gen_ids == NULL) {
        run_msg(cfg, "out of memory (for -n %u)\n", cfg->n_predict);
        goto out;
    }
    if (cfg->logits_path && (cfg->prompts || cfg->n_copies)) {
        run_msg(cfg, "the logits of one sequence only can be written (not with several)\n");
        ret = 2;
        goto out;
    }
    /* tokenize first: a prompt that does not fit is a usage error */
    r.n_seq = 1;
    r.n_cells = cfg->n_ctx;
    rc = cfg->prompts || cfg->n_copies || r.conv || r.serve ? run_par_prepare(&r, &n_prompt)
                                       : prompt_tokens(&r, &prompt_ids, &n_prompt);
    if (rc != 0) {
        ret = rc;
        goto out;
    }
    r.n_prompt_max = n_prompt;
    /* a context past the one the model was trained for still runs (RoPE
     * extrapolates), but the output degrades: say so once */
    if (cfg->n_ctx > r.hp.n_ctx_train) {
        char trained[96];

        baton_llama_ctx_train_desc(&r.hp, trained, sizeof trained);
        run_msg(cfg, "note: a context of %u positions is more than the model was trained for "
                     "(%s); text past that may degrade\n",
                cfg->n_ctx, trained);
    }
    rc = plan_layers(&r, props, n_parts, counts);
    if (rc != 0) {
        ret = rc;
        goto out;
    }
    r.n_stages = (uint32_t)n_parts;
    r.n_slots = cfg->n_slots;
    /* sampling is the last stage's (SAMPLE) */
    r.want_logits = cfg->report_gap || cfg->logits_path != NULL;
    r.sampling = cfg->temp > 0.0f || r.serve; /* a request may sample */
    r.n_ubatch = cfg->n_ubatch ? cfg->n_ubatch
                               : baton_run_default_ubatch((uint32_t)n_prompt, r.n_stages,
                                                          cfg->pipeline);
    if (r.n_ubatch > cfg->n_ctx)
        r.n_ubatch = cfg->n_ctx;
    if (r.n_ubatch > n_prompt) /* no step is larger: smaller I/O buffers */
        r.n_ubatch = (uint32_t)n_prompt;
    if (r.conv || r.serve) {
        /* a conversation (or a server, whose mixed steps carry a ubatch
         * too) registers a graph for the ubatch and for every power of two
         * below it (a turn's rest, run_par_shapes), on every input slot of
         * a stage after the first: as many as a stage may keep, or the
         * power of two below the ubatch */
        const uint32_t per = r.n_stages > 1 ? r.n_slots : 1, u0 = r.n_ubatch;
        uint32_t shape_n[RUN_PAR_SHAPES], shape_out[RUN_PAR_SHAPES];

        r.n_chunk = r.serve ? serve_chunk(r.n_ubatch) : 0;
        while (r.n_ubatch > 1 && run_par_shapes(&r, shape_n, shape_out) * per > RUN_MAX_GRAPHS) {
            uint32_t p = 1;

            while (p * 2 < r.n_ubatch)
                p *= 2;
            r.n_ubatch = p;
            r.n_chunk = r.serve ? serve_chunk(p) : 0;
        }
        r.n_chunk = 0; /* set below */
        if (cfg->n_ubatch != 0 && r.n_ubatch < u0)
            fprintf(cfg->log,
                    "plan: a %s's ubatch is %u, not --ubatch %u: it registers a graph "
                    "for each power of two up to it on each of %u input slot%s, at most %u a "
                    "stage\n",
                    r.serve ? "server" : "conversation", r.n_ubatch, u0, per,
                    per == 1 ? "" : "s", RUN_MAX_GRAPHS);
    }
    r.n_tok_max = r.n_ubatch > r.n_seq ? r.n_ubatch : r.n_seq;
    /* continuous batching: a prompt admitted once decoding has begun rides
     * in its group's decode steps, n_ubatch tokens a step (a server's:
     * serve_chunk) beside the group's tokens (run_parallel.c); only when
     * some prompt waits for a slot (or may: a server) and there is a
     * decode step */
    if (r.seqs && ((cfg->continuous && r.n_par > r.n_seq) || r.serve) && cfg->n_predict > 1) {
        const uint32_t chunk = r.serve ? serve_chunk(r.n_ubatch) : r.n_ubatch;
        const uint32_t mixed = chunk + (r.n_seq + r.n_groups - 1) / r.n_groups;

        r.n_chunk = chunk;
        if (mixed > r.n_tok_max)
            r.n_tok_max = mixed;
    }
    if (make_stages(&r, counts) != 0)
        goto out;
    rc = run_connect_stages(&r);
    if (rc != 0) {
        ret = rc;
        goto out;
    }
    for (i = 0; i < r.n_stages; i++) {
        const struct baton_llama_stage *st = &r.stages[i].st;

        fprintf(cfg->log, "plan: stage %u %-21s layers %u..%u (%u)%s%s\n", i + 1,
                r.stages[i].endpoint, st->layer_begin, st->layer_end - 1,
                st->layer_end - st->layer_begin, st->first ? " +embedding" : "",
                st->last ? " +output head" : "");
    }
    for (i = 0; i < r.n_stages; i++) {
        if (!(baton_conn_server_hello(r.stages[i].conn)->features & BATON_FEATURE_PIPELINE)) {
            stage_msg(&r, "stage %u (%s): the server does not offer registered graphs "
                          "(GRAPH_RUN): a batond of this version is needed\n",
                      i + 1, r.stages[i].endpoint);
            goto out;
        }
        if (run_prepare_stage(&r, &r.stages[i]) != 0)
            goto out;
    }
    /* what a session cannot hold is said now, for every stage, before any
     * weights are uploaded for nothing */
    if (run_check_sessions(&r) != 0)
        goto out;
    for (i = 0; i < r.n_stages; i++)
        if (run_upload_stage(&r, &r.stages[i], &bytes) != 0)
            goto out;
    if (run_setup_direct(&r) != 0)
        goto out;
    if (r.seqs) {
        if (run_par_register(&r) != 0)
            goto out;
        ret = run_par_generate(&r, run_now_s() - t_load0, bytes);
        goto out;
    }
    {
        /* the step shapes of this run: full ubatches, the last one, decode */
        const uint32_t shapes[3] = {n_prompt >= r.n_ubatch ? r.n_ubatch : 0,
                                    (uint32_t)(n_prompt % r.n_ubatch), cfg->n_predict > 1 ? 1 : 0};

        if (run_register_graphs(&r, shapes, 3) != 0)
            goto out;
    }
    t_load = run_now_s() - t_load0;

    /* the prompt, then the continuation as it is generated */
    if (!cfg->quiet && !cfg->prompt_ids) {
        fputs(cfg->prompt, cfg->out);
        fflush(cfg->out);
        r.text_open = cfg->prompt[0] != '\0';
    }
    if (cfg->logits_path) {
        r.logits_out = fopen(cfg->logits_path, "wb");
        if (!r.logits_out) {
            run_msg(cfg, "--logits-out %s: cannot create: %s\n", cfg->logits_path,
                    strerror(errno));
            goto out;
        }
    }
    t0 = run_now_s();
    if (prefill(&r, prompt_ids, n_prompt, &next) != 0)
        goto out;
    t_prefill = run_now_s() - t0;
    run_stats_window(&r, 1);
    t0 = run_now_s();
    if (decode(&r, prompt_ids, n_prompt, next, gen_ids, &n_gen) != 0)
        goto out;
    t_decode = run_now_s() - t0;
    run_stats_window(&r, 0);
    if (!cfg->quiet) {
        fputc('\n', cfg->out);
        r.text_open = 0;
        if (run_flush_text(&r) != 0)
            goto out;
    }
    {
        uint32_t decode_steps = n_gen > 0 ? (uint32_t)(n_gen - 1) : 0;

        fprintf(cfg->log,
                "summary: prompt %zu token%s, generated %zu token%s, load %.2f s (%.1f MiB), "
                "prefill %.1f tok/s, decode %.1f tok/s, stages %u\n",
                n_prompt, n_prompt == 1 ? "" : "s", n_gen, n_gen == 1 ? "" : "s", t_load,
                bytes / 1048576.0,
                t_prefill > 0 ? (double)n_prompt / t_prefill : 0.0,
                t_decode > 0 && decode_steps ? (double)decode_steps / t_decode : 0.0, r.n_stages);
        if (cfg->stats)
            run_print_stats(&r, decode_steps);
        if (cfg->stats_json && run_write_stats_json(&r, cfg->stats_json, decode_steps) != 0) {
            run_msg(cfg, "--stats-json %s: cannot write: %s\n", cfg->stats_json,
                    strerror(errno));
            goto out;
        }
        if (cfg->result)
            fill_result(&r, n_prompt, n_gen, t_load, t_prefill, t_decode, decode_steps);
    }
    if (cfg->ids_path && run_write_ids(cfg->ids_path, prompt_ids, n_prompt, gen_ids, n_gen,
                                       cfg->report_gap, r.min_gap) != 0) {
        run_msg(cfg, "--ids-file %s: cannot write: %s\n", cfg->ids_path, strerror(errno));
        goto out;
    }
    ret = 0;
out:
    if (r.text_open) { /* a failed run: the text (redirected, whole) ends its line */
        fputc('\n', cfg->out);
        fflush(cfg->out);
    }
    if (r.logits_out && fclose(r.logits_out) != 0 && ret == 0) {
        run_msg(cfg, "--logits-out %s: cannot write: %s\n", cfg->logits_path, strerror(errno));
        ret = 1;
    }
    if (r.par)
        run_par_free(&r);
    run_serve_stop(&r, NULL);
    run_conv_free(&r);
    free_run(&r);
    free(prompt_ids);
    free(gen_ids);
    return ret;
}
