/* Several sequences through the split (run_internal.h, "run_parallel.c"):
 * `baton run --prompt-file F --parallel N`.
 *
 * The KV cache of every stage holds N ranges of n_ctx cells; sequence slot
 * j owns cells [j * n_ctx, (j + 1) * n_ctx), and every step carries, per
 * token, its position, the cell it writes and the first cell of its range
 * (ATTENTION's {n,3} positions, core/ops.h), so attention never mixes
 * sequences. Prompts are admitted in file order into free slots: each is
 * prefilled alone (ubatches of n_ubatch tokens, the rest in powers of two,
 * so that a few registered graph shapes serve every prompt length); then
 * one decode step carries one token of every slot (a slot without a
 * sequence computes a placeholder token in its own free range, so the step
 * keeps one registered shape) — or, once fewer slots decode, only theirs in
 * a smaller step of a power-of-two rows (shapes registered when the
 * servers' graph limits allow, "shrunk steps"; placeholders pad it to the
 * power of two) — and the last stage returns every token's
 * argmax, or samples each token (SAMPLE, core/ops.h: the N-th prompt's
 * seed is --seed + N - 1, the counter the token's position). A sequence
 * that ends (EOS, -n) frees its slot for the next prompt. With G pipeline
 * groups the slots are split into G groups whose decode steps overlap on
 * the stages (a group's step waits only for its own previous step).
 *
 * A conversation (`--chat --interactive`, r->conv; run_conv.c reads the
 * messages) is one slot whose sequences are its turns, read as they come:
 * each turn's prompt is the conversation so far, and only its ids after
 * those the previous turn's cells hold are prefilled (prefill_alone's
 * `from`).
 *
 * baton serve's prefix cache (pick_slot, keep_history): a slot keeps the
 * ids whose K and V the last sequence that ended there left in its cells,
 * and a request takes the free slot holding the longest prefix of its
 * prompt, whose prefill starts there (prefill_one's `from`, or the
 * continuous batching's `fed`).
 *
 * Each sequence's ids are those it gives alone: every kernel gives the same
 * bits for any ubatch size (docs/DESIGN.md's determinism rule), and a
 * token's attention reads only its own range. tests/integration/
 * test_parallel.sh checks it on 1, 2 and 3 stages, hub and direct. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "baton/status.h"
#include "model/run_internal.h"
#include "model/tokenizer.h"

/* Most decode rounds in one engine call (a burst): its step list is
 * rounds x groups entries. */
#define PAR_BURST_MAX 1024u
/* ... with the decode ring, whose every step has its own inputs and
 * outputs from the burst's start (a burst's end costs one drain of the
 * steps queued ahead) */
#define PAR_RING_ROUNDS 128u

/* One prompt of the file and what it generated. */
struct par_seq {
    int32_t *ids; /* prompt, then generated: n_prompt + n_gen */
    size_t n_prompt, n_gen;
    size_t n_max; /* generated at most: -n, or a conversation's room left in --ctx */
    char *text; /* generated text, kept for prefixed output */
    size_t text_len, text_cap;
    FILE *out;  /* --output-dir: its own file */
    int done;
    struct serve_req *req; /* baton serve: the HTTP request whose reply this is */
    struct run_serve_seq smp; /* ... and its sampling (smp.ids unused) */
};

static void par_free_seqs(struct par_seq *q, size_t n)
{
    for (size_t i = 0; q && i < n; i++) {
        free(q[i].ids);
        free(q[i].text);
        if (q[i].out)
            fclose(q[i].out);
    }
    free(q);
}

int run_par_prepare(struct run *r, size_t *max_prompt)
{
    const struct baton_run_config *cfg = r->cfg;
    struct par_seq *q;

    if (cfg->report_gap) {
        run_msg(cfg, "--report-gap reads one sequence's logits: not with --prompt-file\n");
        return 2;
    }
    if (r->conv) { /* a conversation: one slot, its turns read as they come */
        r->seqs = 1;
        r->n_seq = 1;
        r->n_groups = 1;
        r->n_cells = cfg->n_ctx;
        *max_prompt = cfg->n_ctx; /* a turn's prompt is the conversation so far */
        return 0;
    }
    r->n_par = cfg->prompts ? cfg->n_prompts : cfg->n_copies;
    if (!r->serve &&
        (r->n_par == 0 || (cfg->prompts == NULL && cfg->prompt_ids == NULL))) {
        run_msg(cfg, "--prompt-file: no prompts (one per line; blank lines are skipped)\n");
        return 2;
    }
    r->seqs = 1;
    r->n_seq = cfg->n_parallel ? cfg->n_parallel : 1;
    if (r->n_seq > r->n_par && !r->serve)
        r->n_seq = (uint32_t)r->n_par; /* no more slots than prompts */
    if ((uint64_t)cfg->n_ctx * r->n_seq > INT32_MAX) {
        run_msg(cfg, "--ctx %u x --parallel %u KV-cache cells exceed 2^31 - 1\n", cfg->n_ctx,
                r->n_seq);
        return 2;
    }
    r->n_cells = cfg->n_ctx * r->n_seq;
    r->n_groups = cfg->n_groups ? cfg->n_groups : 1;
    if (r->n_groups > RUN_MAX_GROUPS) {
        run_msg(cfg, "--groups %u: at most %u\n", r->n_groups, RUN_MAX_GROUPS);
        return 2;
    }
    if (r->n_groups > r->n_seq)
        r->n_groups = r->n_seq; /* a group holds one sequence at least */
    {
        /* groups of ceil(n_seq / G) slots: as many as that leaves non-empty
         * (5 over 4 groups: 2, 2, 1) */
        const uint32_t gs = (r->n_seq + r->n_groups - 1) / r->n_groups;

        r->n_groups = (r->n_seq + gs - 1) / gs;
    }
    if (r->serve) { /* the requests come as it runs: any prompt that fits --ctx */
        r->n_par = 0;
        *max_prompt = cfg->n_ctx;
        return 0;
    }
    q = calloc(r->n_par, sizeof(*q));
    if (q == NULL) {
        run_msg(cfg, "out of memory\n");
        return 1;
    }
    r->par = q;
    *max_prompt = 0;
    size_t n_over = 0, over = 0; /* prompts longer than --ctx - -n; the longest */
    for (size_t i = 0; i < r->n_par; i++) {
        const size_t len = cfg->prompts ? strlen(cfg->prompts[i]) : cfg->n_prompt_ids;
        int rc = 0;

        if (cfg->prompts && len > BATON_TOKENIZER_MAX_TEXT_BYTES) { /* baton_tokenize's E_LIMIT */
            run_msg(cfg,
                    "prompt %zu is %zu bytes; the tokenizer takes at most %u bytes (%u MiB) "
                    "per prompt\n",
                    i + 1, len, BATON_TOKENIZER_MAX_TEXT_BYTES, BATON_TOKENIZER_MAX_TEXT_BYTES >> 20);
            return 2;
        }
        /* the prompt's ids first; room for the generated ones once -n is
         * known to fit --ctx (below: -n may be up to 2^32 - 1) */
        if (cfg->prompts) {
            rc = run_tokenize_prompt(r, i, cfg->prompts[i], len, &q[i].ids, &q[i].n_prompt);
            if (rc == BATON_E_NOMEM) {
                run_msg(cfg, "out of memory\n");
                return 1;
            }
        } else if ((q[i].ids = calloc(len ? len : 1, sizeof(int32_t))) == NULL) {
            run_msg(cfg, "out of memory\n");
            return 1;
        } else { /* the same ids for every copy (baton bench --npl) */
            for (size_t k = 0; k < len; k++)
                if (cfg->prompt_ids[k] < 0 || (uint32_t)cfg->prompt_ids[k] >= r->hp.n_vocab) {
                    run_msg(cfg, "--prompt-ids: id %d is outside the vocabulary of %s (0..%u)\n",
                            cfg->prompt_ids[k], cfg->model_path, r->hp.n_vocab - 1);
                    return 2;
                }
            memcpy(q[i].ids, cfg->prompt_ids, len * sizeof(int32_t));
            q[i].n_prompt = len;
        }
        if (rc != 0) {
            run_msg(cfg, "prompt %zu: cannot tokenize it: %s\n", i + 1, baton_status_str(rc));
            return 1;
        }
        if (q[i].n_prompt == 0) {
            run_msg(cfg, "prompt %zu gives no tokens (and the model has no BOS)\n", i + 1);
            return 2;
        }
        if ((uint64_t)q[i].n_prompt + cfg->n_predict > cfg->n_ctx) {
            /* every prompt is checked: the hint names the longest, so that
             * the --ctx it gives fits them all */
            if (n_over++ == 0 || q[i].n_prompt > q[over].n_prompt)
                over = i;
        }
        if (q[i].n_prompt > *max_prompt)
            *max_prompt = q[i].n_prompt;
    }
    if (n_over > 0) {
        const unsigned long long need = (unsigned long long)q[over].n_prompt + cfg->n_predict;
        char ctx[RUN_CTX_NAME_CAP], hint[RUN_CTX_HINT_CAP], more[64] = "";

        /* as the one-prompt run says it (run.c): "the default --ctx 512"
         * when --ctx was not given */
        run_ctx_name(cfg, ctx, sizeof ctx);
        run_ctx_hint(r, need, hint, sizeof hint);
        if (n_over > 1)
            snprintf(more, sizeof more, "; the longest of %zu prompts that do", n_over);
        run_msg(cfg,
                "prompt %zu (%zu token%s) + -n %u = %llu exceeds %s (the positions of one "
                "sequence%s); %s\n",
                over + 1, q[over].n_prompt, q[over].n_prompt == 1 ? "" : "s", cfg->n_predict,
                need, ctx, more, hint);
        return 2;
    }
    for (size_t i = 0; i < r->n_par; i++) { /* the generated ids' room: within --ctx */
        int32_t *ids = realloc(q[i].ids, ((size_t)q[i].n_prompt + cfg->n_predict) *
                                             sizeof(int32_t));

        if (ids == NULL) {
            run_msg(cfg, "out of memory\n");
            return 1;
        }
        q[i].ids = ids;
        q[i].n_max = cfg->n_predict;
    }
    return 0;
}

/* baton serve: the requests still running fail, saying why (a signal, or
 * a stage failed). */
static void serve_fail_running(struct run *r)
{
    const char *why = r->serve && r->srv && run_serve_stopping(r) == 1
                          ? "the server stopped (SIGINT or SIGTERM)"
                          : "the server stopped: a stage failed (baton serve's log says which)";

    for (size_t i = 0; r->par && i < r->n_par; i++)
        if (r->par[i].req && !r->par[i].done) {
            run_serve_fail(r->par[i].req, why);
            r->par[i].req = NULL;
        }
}

void run_par_free(struct run *r)
{
    serve_fail_running(r);
    par_free_seqs(r->par, r->n_par);
    r->par = NULL;
}

/* The powers of two below u, largest first, that sum to rem (< u). */
static uint32_t split_rest(uint32_t rem, uint32_t *parts)
{
    uint32_t n = 0;

    for (uint32_t b = 1u << 31; b != 0; b >>= 1)
        if (rem & b)
            parts[n++] = b;
    return n;
}

uint32_t run_par_shapes(const struct run *r, uint32_t *counts, uint32_t *outs)
{
    const struct par_seq *q = r->par;
    uint32_t n = 0;

    counts[n] = r->n_ubatch, outs[n++] = 1;
    /* a conversation's turns are not known yet: every power of two below
     * n_ubatch (1 is the decode step's, below, when there is one) */
    for (uint32_t p = 1; (r->conv || r->serve) && p < r->n_ubatch; p *= 2)
        if (p > 1 || r->cfg->n_predict == 1)
            counts[n] = p, outs[n++] = 1;
    for (size_t i = 0; i < r->n_par; i++) {
        uint32_t parts[32], k = split_rest((uint32_t)(q[i].n_prompt % r->n_ubatch), parts);

        for (uint32_t j = 0; j < k; j++) {
            uint32_t c;

            for (c = 0; c < n && !(counts[c] == parts[j] && outs[c] == 1); c++)
                ;
            if (c == n)
                counts[n] = parts[j], outs[n++] = 1;
        }
    }
    if (r->cfg->n_predict > 1) {
        /* a decode step per group: gs slots, the last group the rest */
        const uint32_t gs = (r->n_seq + r->n_groups - 1) / r->n_groups;
        const uint32_t last = r->n_seq - (r->n_groups - 1) * gs;

        counts[n] = gs, outs[n++] = gs;
        if (last != gs)
            counts[n] = last, outs[n++] = last;
        if (r->n_chunk) { /* mixed steps: a prompt's chunk, then the group's tokens */
            counts[n] = r->n_chunk + gs, outs[n++] = gs + 1;
            if (last != gs)
                counts[n] = r->n_chunk + last, outs[n++] = last + 1;
        }
    }
    return n;
}

int run_par_shape_runs(const struct run *r, uint32_t count, uint32_t out)
{
    const uint32_t gs = (r->n_seq + r->n_groups - 1) / r->n_groups;
    const uint32_t last = r->n_seq - (r->n_groups - 1) * gs;
    /* with continuous batching only the prompts that fill the slots at the
     * start are prefilled alone; the others ride in mixed steps */
    const size_t alone = r->n_chunk && r->n_seq < r->n_par ? r->n_seq : r->n_par;

    if (r->cfg->n_predict > 1 && out == count && (count == gs || count == last))
        return 1; /* a group's first decode step has every slot's token */
    /* continuous batching with prompts waiting: a freed slot's next prompt
     * rides beside the group's other rows, in the whole group's mixed step
     * unless a smaller optional shape was registered; register_shapes
     * registers those only with room left for every registered step's
     * arena, this one's included */
    if (r->n_chunk && (r->n_par > r->n_seq || r->serve) && r->cfg->n_predict > 1 &&
        ((gs > 1 && count == r->n_chunk + gs && out == gs + 1) ||
         (last > 1 && count == r->n_chunk + last && out == last + 1)))
        return 1;
    if (out != 1)
        return 0;
    if (r->conv || r->serve) /* any of them may run */
        return count <= r->n_ubatch;
    for (size_t i = 0; i < alone; i++) {
        uint32_t parts[32], k = split_rest((uint32_t)(r->par[i].n_prompt % r->n_ubatch), parts);

        if (r->par[i].n_prompt >= r->n_ubatch && count == r->n_ubatch)
            return 1;
        for (uint32_t j = 0; j < k; j++)
            if (parts[j] == count)
                return 1;
    }
    return 0;
}

int run_par_register(struct run *r)
{
    uint32_t counts[RUN_PAR_SHAPES], outs[RUN_PAR_SHAPES];
    const uint32_t n = run_par_shapes(r, counts, outs);

    if (run_register_graphs_out(r, counts, outs, n) != 0)
        return 1;
    if (r->cfg->n_predict > 1) {
        /* shrunk decode steps, smallest first (the tail of a run gains
         * most): as many as the graph limits allow */
        const uint32_t gs = (r->n_seq + r->n_groups - 1) / r->n_groups;
        uint32_t oc[32], oo[32], m = 0;

        for (uint32_t p = 1; p < gs && m + 2 <= 32; p *= 2) {
            oc[m] = p, oo[m++] = p;
            if (r->n_chunk)
                oc[m] = r->n_chunk + p, oo[m++] = p + 1;
        }
        return run_register_graphs_optional(r, oc, oo, m);
    }
    return 0;
}

/* SAMPLE's parameters for sequence i's token at position counter: its
 * request's (baton serve), else cfg's with the seed --seed + i. */
static void seq_sample(const struct run *r, size_t i, uint32_t counter, int32_t p[6])
{
    const struct run_serve_seq *m = &r->par[i].smp;

    if (r->serve)
        run_sample_params_of(m->temp, m->top_p, m->top_k, m->seed, counter, p);
    else
        run_sample_params(r->cfg, r->cfg->seed + i, counter, p);
}

/* Appends len bytes to q's text. 0 or -1 (out of memory). */
static int text_add(struct par_seq *q, const char *p, size_t len)
{
    if (q->text_len + len + 1 > q->text_cap) {
        size_t cap = (q->text_len + len + 1) * 2;
        char *t = realloc(q->text, cap);

        if (t == NULL)
            return -1;
        q->text = t;
        q->text_cap = cap;
    }
    memcpy(q->text + q->text_len, p, len);
    q->text_len += len;
    q->text[q->text_len] = '\0';
    return 0;
}

/* "--output-dir DIR/N.txt" of sequence i, for messages. */
static const char *output_name(const struct run *r, size_t i, char *buf, size_t cap)
{
    snprintf(buf, cap, "--output-dir %s/%zu.txt", r->cfg->output_dir, i + 1);
    return buf;
}

/* run_flush_out of sequence i's --output-dir file f. */
static int flush_output(struct run *r, size_t i, FILE *f)
{
    char name[4200];

    return run_flush_out(r, f, output_name(r, i, name, sizeof name));
}

/* Sequence i (prompt number i + 1) has ended: its text goes out, its file
 * is closed. 0, or -1 after a message when the text could not be written
 * (run_flush_out). */
static int finish(struct run *r, size_t i)
{
    struct par_seq *q = &r->par[i];
    const char *p;
    char name[4200];

    q->done = 1;
    if (q->req) { /* baton serve: the reply goes out */
        struct serve_req *req = q->req;

        q->req = NULL;
        /* "stop" at an end-of-generation token it stopped at (not one
         * --ignore-eos went past) */
        run_serve_done(req,
                       !r->cfg->ignore_eos && q->n_gen > 0 &&
                           baton_tokenizer_is_eog(r->tok, q->ids[q->n_prompt + q->n_gen - 1]),
                       q->n_gen);
        return 0;
    }
    if (r->conv) { /* the reply ends its line */
        if (!r->cfg->quiet) {
            fputc('\n', r->cfg->out);
            r->text_open = 0;
            if (run_flush_text(r) != 0)
                return -1;
        }
        if (q->n_gen < r->cfg->n_predict && q->n_gen == q->n_max &&
            !baton_tokenizer_is_eog(r->tok, q->ids[q->n_prompt + q->n_gen - 1]))
            fprintf(r->cfg->log, "(the reply was cut where the conversation filled --ctx %u)\n",
                    r->cfg->n_ctx);
        return 0;
    }
    if (q->out) { /* --output-dir: written with --quiet too */
        FILE *f = q->out;
        int rc;

        q->out = NULL;
        fputc('\n', f);
        rc = flush_output(r, i, f);
        if (fclose(f) != 0 && rc == 0) {
            const int e = errno;

            run_msg(r->cfg, "%s: cannot write: %s\n", output_name(r, i, name, sizeof name),
                    strerror(e));
            rc = 1;
        }
        return rc ? -1 : 0;
    }
    if (r->cfg->quiet)
        return 0;
    /* prefixed lines: "[N] " and each line of the prompt and its text (N:
     * the prompt's number in the file, blank lines not counted), byte for
     * byte as one sequence streams it: a piece can hold a NUL (<0x00>), so
     * by length, not as a C string (the text after one was lost) */
    p = q->text ? q->text : "";
    for (size_t left = q->text_len;;) {
        const char *nl = memchr(p, '\n', left);
        const size_t len = nl ? (size_t)(nl - p) : left;

        fprintf(r->cfg->out, "[%zu] ", i + 1);
        fwrite(p, 1, len, r->cfg->out);
        fputc('\n', r->cfg->out);
        if (nl == NULL)
            break;
        p = nl + 1;
        left -= len + 1;
    }
    return run_flush_text(r) ? -1 : 0;
}

/* Takes token t of sequence i: kept, its text added. Returns 1 when the
 * sequence ends with it, 0 when it goes on, -1 on an error (said). */
static int take(struct run *r, size_t i, int32_t t)
{
    struct par_seq *q = &r->par[i];
    const struct baton_run_config *cfg = r->cfg;
    char piece[256];
    size_t plen = 0;

    if (t < 0 || (uint32_t)t >= r->hp.n_vocab) {
        stage_msg(r, "stage %u returned token id %d outside the vocabulary\n", r->n_stages, t);
        return -1;
    }
    q->ids[q->n_prompt + q->n_gen++] = t;
    if (baton_tokenizer_is_eog(r->tok, t) && !cfg->ignore_eos)
        return 1;
    if (q->req) {
        /* baton serve: its client gets the piece; one gone, or a stop string
         * the piece completes, ends the sequence here (its slot is freed) */
        if (baton_token_to_piece(r->tok, t, q->ids[q->n_prompt + q->n_gen - 2], piece,
                                 sizeof(piece), &plen) == 0 &&
            plen > 0 && run_serve_piece(q->req, piece, plen) != 0)
            return 1;
        return q->n_gen == q->n_max;
    }
    if ((q->out || !cfg->quiet) &&
        baton_token_to_piece(r->tok, t, q->ids[q->n_prompt + q->n_gen - 2], piece, sizeof(piece),
                             &plen) == 0 &&
        plen > 0) {
        if (r->conv) { /* a conversation's reply streams as it comes */
            fwrite(piece, 1, plen, cfg->out);
            r->text_open = 1;
            if (run_flush_text(r) != 0)
                return -1;
        } else if (q->out) {
            fwrite(piece, 1, plen, q->out);
            if (flush_output(r, i, q->out) != 0)
                return -1;
        } else if (text_add(q, piece, plen) != 0) {
            stage_msg(r, "out of memory\n");
            return -1;
        }
    }
    return q->n_gen == q->n_max;
}

/* Prefills sequence i into slot j from prompt token `from` on (a multiple
 * of n_ubatch: the tokens before it are in its cells already, from mixed
 * steps); *first gets its first token. 0 or 1. */
static int prefill_one(struct run *r, size_t i, uint32_t j, uint32_t from, int32_t *first)
{
    const struct par_seq *q = &r->par[i];
    const uint32_t u = r->n_ubatch, n = (uint32_t)q->n_prompt;
    const int32_t base = (int32_t)(j * r->cfg->n_ctx);
    struct run_ubatch ub[64];
    int32_t *sp = malloc((size_t)n * 3 * sizeof(int32_t)), smp[64 * 6];
    uint32_t m = 0, at = from, parts[32];
    int rc;

    if (sp == NULL) {
        stage_msg(r, "out of memory\n");
        return 1;
    }
    while (at < n) {
        uint32_t len = u;

        if (n - at < u) { /* the rest: its largest power of two first */
            (void)split_rest(n - at, parts);
            len = parts[0];
        }
        memset(&ub[m], 0, sizeof ub[m]);
        ub[m].tokens = q->ids + at;
        ub[m].n = len;
        ub[m].pos0 = at;
        /* positions, cells, first cells of this ubatch, at 3 * at */
        for (uint32_t t = 0; t < len; t++) {
            sp[3 * at + t] = (int32_t)(at + t);
            sp[3 * at + len + t] = base + (int32_t)(at + t);
            sp[3 * at + 2 * len + t] = base;
        }
        ub[m].seqpos = sp + 3 * at;
        /* sampled: the sequence's seed, the ubatch's last position */
        seq_sample(r, i, at + len - 1, smp + 6 * m);
        ub[m].sample = r->sampling ? smp + 6 * m : NULL;
        at += len;
        /* a run of full ubatches and then at most 32 parts: flush a full list */
        if (++m == sizeof(ub) / sizeof(ub[0]) && at < n) {
            rc = run_engine(r, ub, m, first);
            if (rc != 0) {
                free(sp);
                return 1;
            }
            m = 0;
        }
    }
    rc = run_engine(r, ub, m, first);
    free(sp);
    return rc != 0;
}

/* Writes the --ids-file of several sequences. 0 or -1. */
static int write_ids(const struct run *r, const char *path)
{
    FILE *f = fopen(path, "w");

    if (f == NULL)
        return -1;
    fprintf(f, "{\"parallel\": %u, \"sequences\": [", r->n_seq);
    for (size_t i = 0; i < r->n_par; i++) {
        const struct par_seq *q = &r->par[i];

        if (r->conv && !q->done)
            break; /* a conversation's turn that failed: not part of its output */
        fprintf(f, "%s\n {\"index\": %zu, \"prompt\": [", i ? "," : "", i + 1);
        for (size_t k = 0; k < q->n_prompt; k++)
            fprintf(f, "%s%d", k ? ", " : "", q->ids[k]);
        fprintf(f, "], \"generated\": [");
        for (size_t k = 0; k < q->n_gen; k++)
            fprintf(f, "%s%d", k ? ", " : "", q->ids[q->n_prompt + k]);
        fprintf(f, "]}");
    }
    fprintf(f, "\n]}\n");
    return fclose(f) == 0 ? 0 : -1;
}

/* Opens --output-dir/N.txt (N = i + 1) for sequence i and writes its prompt. 0 or 1. */
static int open_output(struct run *r, size_t i)
{
    char path[4096];
    struct par_seq *q = &r->par[i];

    if (r->cfg->output_dir == NULL || r->cfg->prompts == NULL)
        return 0;
    if ((size_t)snprintf(path, sizeof path, "%s/%zu.txt", r->cfg->output_dir, i + 1) >=
        sizeof path) {
        run_msg(r->cfg, "--output-dir %s: path too long\n", r->cfg->output_dir);
        return 1;
    }
    {
        /* not through a symbolic link someone left there */
        const int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0644);

        q->out = fd >= 0 ? fdopen(fd, "w") : NULL;
        if (q->out == NULL) {
            run_msg(r->cfg, "--output-dir: cannot create %s: %s%s\n", path, strerror(errno),
                    errno == ELOOP ? " (a symbolic link: not followed)" : "");
            if (fd >= 0)
                close(fd);
            return 1;
        }
    }
    fputs(r->cfg->prompts[i], q->out);
    return flush_output(r, i, q->out);
}

/* The decode state: which sequence each slot holds, and per group the
 * inputs and outputs of its current step (a group's next step is filled
 * only once its last has retired, so one set per group serves them all).
 *
 * Continuous batching (r->n_chunk): a prompt admitted once decoding has
 * begun is not prefilled alone; its slot is "prefilling" (a sequence, no
 * token yet) and each step of its group carries the next n_chunk tokens of
 * it in front of the group's decode tokens: rows [0, n_chunk) the chunk
 * (a short last chunk is padded at its front), then a row per slot, and
 * the step returns the last n + 1 rows' tokens (the chunk's last row first:
 * the sequence's first token once its last chunk has run). One prompt per
 * group at a time rides along. Padding rows and the rows of slots with no
 * decode token are placeholders: position 0, written to and read from the
 * slot's last cell only, which no token of a sequence uses (a prompt plus
 * -n is at most --ctx positions, and the last token generated is never
 * fed back), so they change no sequence's bits. */
struct par_state {
    struct run *r;
    size_t *slot_seq;   /* sequence in slot j, + 1; 0: free */
    uint32_t *fed;      /* prompt tokens of slot j's sequence in its cells (prefilling) */
    size_t *row_seq;    /* slot j: sequence + 1 whose decode token its row carries in
                           the group's current step, or 0 */
    uint32_t *row_slot; /* per group g, row c of its current step: the slot whose decode
                           token it carries, or UINT32_MAX (row_slot[g * gs + c]) */
    uint32_t *rows;     /* per group: decode rows of its current step */
    uint32_t groups, gs; /* groups, slots per group (the last may have fewer) */
    uint32_t tstride, ostride; /* per group: token rows (n_chunk + gs), outputs (gs + 1) */
    int32_t *tokens, *sp; /* per group g: tokens[g*tstride..], sp[3*g*tstride..] */
    int32_t *out, *smp;   /* per group g: out[g*ostride..], SAMPLE's smp[6*g*ostride..] */
    int64_t *mix_slot;    /* per group: the slot whose chunk its current step carries, or -1 */
    int *mix_last;        /* ... and whether that chunk ends the prompt */
    struct run_ubatch *ub; /* the burst being run, m steps (on_retire fills them) */
    uint32_t m;
    /* the decode ring (run_plan.c set it up): every step of a burst is
     * queued at its start, each with its own positions, SAMPLE parameters
     * and outputs (m of each); the rows stay those of the burst's start */
    int ring;
    int32_t *rsp, *rsmp, *rout;
    size_t n_ended;       /* sequences ended so far */
    size_t next_prompt;   /* the next prompt to admit */
    size_t n_gen;
    size_t mixed_tokens;  /* prompt tokens that rode in decode steps */
    uint32_t decode_steps, mixed_steps, shrunk_steps;
    /* decode steps that kept every slot's row though a smaller power of two
     * would have held the decoding ones: no such shape was registered (the
     * servers' graph limit) */
    uint32_t unshrunk_steps;
    int failed;
    /* baton serve's prefix cache (cfg->serve->prefix_cache): per slot, the
     * ids whose K and V its cells [0, hist_n[j]) hold, from the last
     * sequence that ended there (its prompt and every generated token but
     * the last, which was never fed); 0 while a sequence holds the slot */
    int32_t **hist;
    uint32_t *hist_n;
    uint64_t *last_use;   /* per slot: when a sequence last took it (admissions so far) */
    uint64_t admissions;
    size_t reused_tokens; /* prompt tokens not computed: their cells held them */
};

static uint32_t group_size(const struct par_state *ps, uint32_t g)
{
    const uint32_t first = g * ps->gs, ns = ps->r->n_seq;

    return ns - first < ps->gs ? ns - first : ps->gs;
}

/* Slot j holds a sequence that has its first token (it decodes). */
static int decoding(const struct par_state *ps, uint32_t j)
{
    return ps->slot_seq[j] != 0 && ps->r->par[ps->slot_seq[j] - 1].n_gen > 0;
}

static int any_decoding(const struct par_state *ps)
{
    for (uint32_t j = 0; j < ps->r->n_seq; j++)
        if (decoding(ps, j))
            return 1;
    return 0;
}

/* A placeholder row (padding, or a slot with no decode token): position 0
 * in slot j's last cell, which no sequence token uses. */
static void placeholder(const struct par_state *ps, uint32_t j, uint32_t row, uint32_t n,
                        int32_t *tok, int32_t *sp)
{
    const int32_t cell = (int32_t)(j * ps->r->cfg->n_ctx + ps->r->cfg->n_ctx - 1);

    tok[row] = 0;
    sp[row] = 0;
    sp[n + row] = cell;
    sp[2 * n + row] = cell;
}

/* Decode rows for group g's next step when a of its n slots decode: the
 * smallest power of two >= a (at least 1) whose shape every stage has
 * registered (c0 chunk rows in front, outputs + 1 with a chunk), else n. */
static uint32_t step_rows(const struct par_state *ps, uint32_t a, uint32_t n, uint32_t c0)
{
    for (uint32_t p = 1; p < n; p *= 2)
        if (p >= a && run_has_shape(ps->r, c0 + p, p + (c0 ? 1 : 0)))
            return p;
    return n;
}

/* The inputs of group g's next decode step, into *u: a chunk of the
 * group's first prefilling prompt (continuous batching), then each
 * decoding slot's last token at its next position (every slot's row, a
 * placeholder for one that does not decode; or, in a shrunk step, only the
 * decoding slots' rows, then placeholders up to the step's rows). */
static void fill_group(struct par_state *ps, uint32_t g, struct run_ubatch *u)
{
    struct run *r = ps->r;
    const uint32_t n = group_size(ps, g), j0 = g * ps->gs;
    int32_t *tok = ps->tokens + (size_t)g * ps->tstride, *sp = ps->sp + 3 * (size_t)g * ps->tstride;
    int32_t *smp = ps->smp + 6 * (size_t)g * ps->ostride;
    uint32_t c0 = 0, total, mj = UINT32_MAX, a = 0, rows, c = 0;

    for (uint32_t k = 0; r->n_chunk && k < n && mj == UINT32_MAX; k++)
        if (ps->slot_seq[j0 + k] != 0 && !decoding(ps, j0 + k))
            mj = j0 + k;
    c0 = mj != UINT32_MAX ? r->n_chunk : 0;
    for (uint32_t k = 0; k < n; k++)
        a += decoding(ps, j0 + k) ? 1 : 0;
    rows = step_rows(ps, a, n, c0);
    total = c0 + rows;
    ps->mix_slot[g] = mj != UINT32_MAX ? (int64_t)mj : -1;
    if (mj != UINT32_MAX) {
        const size_t i = ps->slot_seq[mj] - 1;
        const struct par_seq *q = &r->par[i];
        const uint32_t at = ps->fed[mj], left = (uint32_t)q->n_prompt - at;
        const uint32_t len = left < r->n_chunk ? left : r->n_chunk, pad = r->n_chunk - len;
        const int32_t base = (int32_t)(mj * r->cfg->n_ctx);

        for (uint32_t t = 0; t < pad; t++)
            placeholder(ps, mj, t, total, tok, sp);
        for (uint32_t t = 0; t < len; t++) {
            tok[pad + t] = q->ids[at + t];
            sp[pad + t] = (int32_t)(at + t);
            sp[total + pad + t] = base + (int32_t)(at + t);
            sp[2 * total + pad + t] = base;
        }
        ps->fed[mj] = at + len;
        ps->mix_last[g] = at + len == q->n_prompt;
        ps->mixed_tokens += len;
        /* output row 0: the chunk's last token (the first generated, once
         * the prompt is in) */
        seq_sample(r, i, at + len - 1, smp);
    }
    ps->rows[g] = rows;
    if (rows < n) {
        ps->shrunk_steps++;
    } else {
        uint32_t p = 1;

        while (p < a)
            p *= 2;
        if (p < n)
            ps->unshrunk_steps++;
    }
    for (uint32_t k = 0; k < n; k++) {
        const uint32_t j = j0 + k;

        ps->row_seq[j] = 0;
        if (rows == n || decoding(ps, j))
            ps->row_slot[j0 + c++] = j;
    }
    for (; c < rows; c++) /* padding of a shrunk step: distinct slots' last cells */
        ps->row_slot[j0 + c] = UINT32_MAX;
    for (c = 0; c < rows; c++) {
        const uint32_t row = c0 + c, j = ps->row_slot[j0 + c];
        int32_t *rs = smp + 6 * (size_t)((c0 ? 1 : 0) + c);

        if (j != UINT32_MAX && decoding(ps, j)) {
            const struct par_seq *q = &r->par[ps->slot_seq[j] - 1];
            const int32_t p = (int32_t)(q->n_prompt + q->n_gen - 1);
            const int32_t base = (int32_t)(j * r->cfg->n_ctx);

            tok[row] = q->ids[q->n_prompt + q->n_gen - 1];
            sp[row] = p;
            sp[total + row] = base + p;
            sp[2 * total + row] = base;
            seq_sample(r, ps->slot_seq[j] - 1, (uint32_t)p, rs);
            ps->row_seq[j] = ps->slot_seq[j];
        } else {
            placeholder(ps, j != UINT32_MAX ? j : j0 + c, row, total, tok, sp);
            run_sample_params(r->cfg, 0, 0, rs);
        }
    }
    u->tokens = tok;
    u->n = total;
    u->seqpos = sp;
    u->n_out = ps->rows[g] + (c0 ? 1 : 0);
    u->out = ps->out + (size_t)g * ps->ostride;
    u->sample = r->sampling ? smp : NULL;
}

/* The prefix cache: slot j's cells now hold sequence q's ids but its last
 * (generated, never fed). Out of memory keeps nothing (the slot's next
 * sequence computes its whole prompt). */
static void keep_history(struct par_state *ps, uint32_t j, const struct par_seq *q)
{
    const size_t n = q->n_prompt + q->n_gen - 1; /* >= 1: it ended with a token */
    int32_t *h = realloc(ps->hist[j], n * sizeof(*h));

    ps->hist_n[j] = 0;
    if (h == NULL)
        return;
    ps->hist[j] = h;
    memcpy(h, q->ids, n * sizeof(*h));
    ps->hist_n[j] = (uint32_t)n; /* n < n_ctx */
}

/* The free slot of [j0, j0 + n) for sequence i: the one whose cells hold
 * the longest prefix of its prompt, of equals the one least recently taken
 * (the lowest free slot without the prefix cache), so that a request with
 * nothing in common with the others leaves the longest-kept histories;
 * UINT32_MAX when none is free. *from gets
 * how many of the prompt's ids that slot holds, at most n_prompt - 1 (the
 * prompt's last token is always computed: its logits give the first
 * token). The slot's history is dropped: the sequence overwrites its cells
 * from there on. */
static uint32_t pick_slot(struct par_state *ps, uint32_t j0, uint32_t n, size_t i,
                          uint32_t *from)
{
    const struct par_seq *q = &ps->r->par[i];
    uint32_t best = UINT32_MAX, best_len = 0;

    for (uint32_t j = j0; j < j0 + n; j++) {
        uint32_t len = 0;

        if (ps->slot_seq[j] != 0)
            continue;
        while (ps->hist != NULL && len < ps->hist_n[j] && len + 1 < q->n_prompt &&
               ps->hist[j][len] == q->ids[len])
            len++;
        if (best == UINT32_MAX || len > best_len ||
            (len == best_len && ps->hist != NULL && ps->last_use[j] < ps->last_use[best])) {
            best = j;
            best_len = len;
        }
    }
    if (best != UINT32_MAX && ps->hist != NULL) {
        ps->hist_n[best] = 0;
        ps->last_use[best] = ++ps->admissions;
    }
    *from = best_len;
    return best;
}

/* Sequence i takes token t; one that ends frees slot j. 0 or -1. */
static int take_slot(struct par_state *ps, uint32_t j, size_t i, int32_t t)
{
    const int rc = take(ps->r, i, t);

    ps->n_gen++;
    if (rc < 0)
        return -1;
    if (rc > 0) {
        ps->slot_seq[j] = 0;
        ps->n_ended++;
        if (ps->hist != NULL)
            keep_history(ps, j, &ps->r->par[i]);
        if (finish(ps->r, i) != 0)
            return -1;
    }
    return 0;
}

/* Takes group g's outputs out[]: a prompt whose last chunk ran gets its
 * first token, every decode row whose sequence has not ended its next; a
 * sequence that ends frees its slot. 0 or -1. */
static int take_group(struct par_state *ps, uint32_t g, const int32_t *out)
{
    const uint32_t j0 = g * ps->gs;
    const uint32_t row0 = ps->mix_slot[g] >= 0 ? 1 : 0;

    if (row0) {
        const uint32_t j = (uint32_t)ps->mix_slot[g];

        ps->mixed_steps++;
        if (ps->mix_last[g] && take_slot(ps, j, ps->slot_seq[j] - 1, out[0]) != 0)
            return -1;
    }
    for (uint32_t c = 0; c < ps->rows[g]; c++) {
        const uint32_t j = ps->row_slot[j0 + c];

        /* the row's sequence as the step was filled, if it goes on (a ring
         * step queued ahead still computes a row for one that has ended) */
        if (j != UINT32_MAX && ps->row_seq[j] != 0 && ps->slot_seq[j] == ps->row_seq[j] &&
            take_slot(ps, j, ps->row_seq[j] - 1, out[row0 + c]) != 0)
            return -1;
    }
    return 0;
}

/* Opens prompt i's output and keeps its text before it is admitted. 0 or 1
 * (said). */
static int admit_begin(struct run *r, size_t i)
{
    if (open_output(r, i) != 0)
        return 1;
    if (!r->cfg->quiet && r->cfg->prompts && r->par[i].out == NULL &&
        text_add(&r->par[i], r->cfg->prompts[i], strlen(r->cfg->prompts[i])) != 0) {
        stage_msg(r, "out of memory\n");
        return 1;
    }
    return 0;
}

/* baton serve: queued requests become the next sequences, as many as slots
 * [j0, j0 + n) have free beyond the sequences already waiting for one;
 * wait: blocks for the first when none is queued (run_serve_take). 0, or
 * 1 (out of memory: said, the request failed). */
static int serve_pull(struct par_state *ps, uint32_t j0, uint32_t n, int wait)
{
    struct run *r = ps->r;
    size_t room = 0;

    for (uint32_t k = 0; k < n; k++)
        room += ps->slot_seq[j0 + k] == 0;
    room = room > r->n_par - ps->next_prompt ? room - (r->n_par - ps->next_prompt) : 0;
    for (; room > 0; room--, wait = 0) {
        struct run_serve_seq seq;
        struct serve_req *req = run_serve_take(r, wait, &seq);
        struct par_seq *q;

        if (req == NULL)
            break;
        q = realloc(r->par, (r->n_par + 1) * sizeof(*q));
        if (q == NULL) {
            free(seq.ids);
            run_serve_fail(req, "out of memory");
            stage_msg(r, "out of memory\n");
            return 1;
        }
        r->par = q;
        q = &r->par[r->n_par++];
        memset(q, 0, sizeof *q);
        q->ids = seq.ids;
        q->n_prompt = seq.n_prompt;
        q->n_max = seq.n_max;
        q->req = req;
        q->smp = seq;
        q->smp.ids = NULL;
    }
    return 0;
}

/* baton serve, between bursts: the sequences that ended leave r->par (a
 * server's requests would grow it without end); the others keep their
 * order, and the slots their new numbers. */
static void serve_compact(struct par_state *ps)
{
    struct run *r = ps->r;
    size_t k = 0, next = 0;

    for (size_t i = 0; i < r->n_par; i++) {
        uint32_t j;

        for (j = 0; j < r->n_seq && ps->slot_seq[j] != i + 1; j++)
            ;
        if (j == r->n_seq && r->par[i].done) {
            free(r->par[i].ids);
            free(r->par[i].text);
            continue;
        }
        if (k != i)
            r->par[k] = r->par[i];
        if (j < r->n_seq)
            ps->slot_seq[j] = k + 1;
        next += i < ps->next_prompt;
        k++;
    }
    r->n_par = k;
    ps->next_prompt = next;
}

/* Sequence i starts with `from` prompt ids its slot's cells held: counted,
 * and told to its request. */
static void admit_reused(struct par_state *ps, size_t i, uint32_t from)
{
    ps->reused_tokens += from;
    if (ps->r->par[i].req != NULL)
        run_serve_cached(ps->r->par[i].req, from);
}

/* Continuous batching: the next prompts go into group g's free slots (each
 * the one holding the longest prefix of its prompt), to ride in its decode
 * steps. 0 or 1. */
static int admit_mixed(struct par_state *ps, uint32_t g)
{
    const uint32_t n = group_size(ps, g), j0 = g * ps->gs;

    while (ps->next_prompt < ps->r->n_par) {
        uint32_t from;
        const uint32_t j = pick_slot(ps, j0, n, ps->next_prompt, &from);

        if (j == UINT32_MAX)
            break;
        if (admit_begin(ps->r, ps->next_prompt) != 0)
            return 1;
        admit_reused(ps, ps->next_prompt, from);
        ps->slot_seq[j] = ++ps->next_prompt; /* prompt next_prompt - 1, + 1 */
        ps->fed[j] = from;
    }
    return 0;
}

/* on_retire of a decode burst: step k is group k mod G's; its outputs are
 * taken, freed slots take the next prompts (continuous batching), and the
 * group's next step (k + G) is filled. */
static int burst_retire(struct run *r, uint32_t k)
{
    struct par_state *ps = r->on_retire_arg;
    const uint32_t g = k % ps->groups;
    const size_t ended = ps->n_ended;

    ps->decode_steps++;
    if (take_group(ps, g, ps->ub[k].out) != 0 ||
        (r->serve && serve_pull(ps, g * ps->gs, group_size(ps, g), 0) != 0) ||
        (r->n_chunk && admit_mixed(ps, g) != 0)) {
        ps->failed = 1;
        return 1;
    }
    if (r->serve && run_serve_stopping(r))
        return 2; /* the steps after this one are dropped: the server stops */
    if (ps->ring) {
        /* the ring's steps are all queued: they stop early when no row's
         * sequence goes on, or when one ended and a prompt waits for its
         * slot (the steps queued past it are dropped, 2) */
        uint32_t j;

        for (j = 0; j < r->n_seq && !(ps->row_seq[j] != 0 && ps->slot_seq[j] == ps->row_seq[j]);
             j++)
            ;
        return j == r->n_seq || (ps->n_ended > ended && ps->next_prompt < r->n_par) ? 2 : 0;
    }
    /* the burst's rounds are the fewest left to -n, but a sequence can end
     * sooner at EOS: once every slot is free, or one ended while a prompt
     * waits that only the next burst admits (without continuous batching),
     * the steps after this one would carry placeholders only (a 15-token
     * sequence at -n 1000 ran 999 steps). The dropped steps of other groups
     * are filled again, with the same inputs, by the next burst; with
     * continuous batching a dropped step could hold a prompt's chunk, so
     * there only an empty set of slots, which no chunk is for, stops it. */
    if (ps->n_ended > ended) {
        uint32_t j;

        for (j = 0; j < r->n_seq && ps->slot_seq[j] == 0; j++)
            ;
        if (j == r->n_seq || (!r->n_chunk && ps->next_prompt < r->n_par))
            return 2;
    }
    if (k + ps->groups < ps->m)
        fill_group(ps, g, &ps->ub[k + ps->groups]);
    return 0;
}

/* The decode ring: group g's steps g, g + G, ... of a burst of `rounds`
 * rounds, all at once. Its first step is fill_group's; the later ones take
 * their tokens around the ring (tokens NULL: the outputs of the group's
 * step before, row for row) at the next positions of the same rows, each
 * with its own positions, SAMPLE parameters and outputs. */
static void fill_ring(struct par_state *ps, uint32_t g, uint32_t rounds)
{
    struct run *r = ps->r;
    struct run_ubatch *u0 = &ps->ub[g];
    const uint32_t j0 = g * ps->gs;

    fill_group(ps, g, u0);
    for (uint32_t t = 0; t < rounds; t++) {
        const uint32_t k = t * ps->groups + g, n = u0->n;
        struct run_ubatch *u = &ps->ub[k];
        int32_t *sp = ps->rsp + 3 * (size_t)k * ps->tstride;
        int32_t *smp = ps->rsmp + 6 * (size_t)k * ps->ostride;

        memcpy(sp, u0->seqpos, 3 * (size_t)n * sizeof(int32_t));
        memcpy(smp, ps->smp + 6 * (size_t)g * ps->ostride, 6 * (size_t)u0->n_out * sizeof(int32_t));
        for (uint32_t c = 0; c < ps->rows[g]; c++) {
            const uint32_t j = ps->row_slot[j0 + c];

            if (j == UINT32_MAX || ps->row_seq[j] == 0)
                continue; /* a placeholder: the same cell every round */
            sp[c] += (int32_t)t;
            sp[n + c] += (int32_t)t;
            seq_sample(r, ps->row_seq[j] - 1, (uint32_t)sp[c], smp + 6 * (size_t)c);
        }
        *u = *u0;
        u->tokens = t == 0 ? u0->tokens : NULL;
        u->seqpos = sp;
        u->sample = r->sampling ? smp : NULL;
        u->out = ps->rout + (size_t)k * ps->ostride;
        u->after = 0;
    }
}

/* Prefills sequence i alone into slot j from prompt token `from` on and
 * takes its first token (t_prefill, n_prompt_tokens count it). 0 or 1. */
static int prefill_alone(struct par_state *ps, uint32_t j, size_t i, uint32_t from,
                         double *t_prefill, size_t *n_prompt_tokens)
{
    struct run *r = ps->r;
    const double t0 = run_now_s();
    int32_t first;

    ps->slot_seq[j] = i + 1;
    if (prefill_one(r, i, j, from, &first) != 0)
        return 1;
    *t_prefill += run_now_s() - t0;
    *n_prompt_tokens += r->par[i].n_prompt - from;
    return take_slot(ps, j, i, first) != 0;
}

/* A conversation's next turn (r->conv): reads the user's next message and
 * makes it the next sequence, whose prompt is the conversation so far (the
 * last reply without the end-of-generation token it ended with) and the
 * message laid out; *from gets how many of its ids slot 0's cells hold
 * already: the last turn's, but its last generated token, which was never
 * fed back. 1: a turn; 0: the input ended; -1: an error (said), *code the
 * exit code. */
static int conv_next(struct par_state *ps, uint32_t *from, int *code)
{
    struct run *r = ps->r;
    const struct baton_run_config *cfg = r->cfg;
    const struct par_seq *prev = r->n_par ? &r->par[r->n_par - 1] : NULL;
    size_t n_prev = 0, n_ids = 0, len = 0;
    const char *msg = NULL;
    int32_t *ids = NULL, *grown;
    struct par_seq *q;
    int rc = run_conv_read(r, &msg, &len);

    *code = 1;
    if (rc <= 0)
        return rc;
    *from = 0;
    if (prev) {
        n_prev = prev->n_prompt + prev->n_gen;
        *from = (uint32_t)(n_prev - 1);
        if (baton_tokenizer_is_eog(r->tok, prev->ids[n_prev - 1]))
            n_prev--;
    }
    rc = run_conv_turn(r, prev ? prev->ids : NULL, n_prev, msg, len, &ids, &n_ids);
    if (rc != 0) {
        *code = rc;
        return -1;
    }
    if (n_ids >= cfg->n_ctx) {
        char ctx[RUN_CTX_NAME_CAP];

        run_ctx_name(cfg, ctx, sizeof ctx);
        stage_msg(r, "the conversation with this message is %zu tokens: %s holds no more (give "
                     "a larger --ctx)\n",
                  n_ids, ctx);
        free(ids);
        return -1;
    }
    q = realloc(r->par, (r->n_par + 1) * sizeof(*q));
    if (q != NULL)
        r->par = q;
    {
        const size_t n_max = cfg->n_ctx - n_ids < cfg->n_predict ? cfg->n_ctx - n_ids
                                                                 : cfg->n_predict;

        grown = q ? realloc(ids, (n_ids + n_max) * sizeof(*ids)) : NULL;
        if (grown == NULL) {
            free(ids);
            stage_msg(r, "out of memory\n");
            return -1;
        }
        q = &r->par[r->n_par++];
        memset(q, 0, sizeof *q);
        q->ids = grown;
        q->n_prompt = n_ids;
        q->n_max = n_max;
    }
    return 1;
}

int run_par_generate(struct run *r, double t_load, double bytes)
{
    const struct baton_run_config *cfg = r->cfg;
    const uint32_t ns = r->n_seq;
    struct par_state ps;
    struct run_ubatch *ub = NULL;
    size_t n_prompt_tokens = 0;
    double t_prefill = 0, t_decode = 0, t0;
    int ret = 1, window = 0, started = 0, conv_code = 0, serving = 0;
    size_t n_turns = 0; /* a conversation's turns that ended */
    size_t turn0_prompt = 0, turn0_gen = 0; /* ... and their figures before its last turn */
    double turn0_prefill = 0, turn0_decode = 0;

    memset(&ps, 0, sizeof ps);
    ps.r = r;
    ps.groups = r->n_groups;
    ps.gs = (ns + ps.groups - 1) / ps.groups;
    ps.tstride = r->n_chunk + ps.gs;
    ps.ostride = ps.gs + 1;
    ps.slot_seq = calloc(ns, sizeof(size_t));
    ps.row_seq = calloc(ns, sizeof(size_t));
    ps.row_slot = calloc(ns, sizeof(uint32_t));
    ps.rows = calloc(ps.groups, sizeof(uint32_t));
    ps.fed = calloc(ns, sizeof(uint32_t));
    ps.tokens = calloc((size_t)ps.groups * ps.tstride, sizeof(int32_t));
    ps.sp = calloc((size_t)ps.groups * ps.tstride * 3, sizeof(int32_t));
    ps.out = calloc((size_t)ps.groups * ps.ostride, sizeof(int32_t));
    ps.smp = calloc((size_t)ps.groups * ps.ostride * 6, sizeof(int32_t));
    ps.mix_slot = calloc(ps.groups, sizeof(int64_t));
    ps.mix_last = calloc(ps.groups, sizeof(int));
    if (ps.slot_seq == NULL || ps.row_seq == NULL || ps.row_slot == NULL || ps.rows == NULL ||
        ps.fed == NULL || ps.tokens == NULL ||
        ps.out == NULL || ps.sp == NULL || ps.smp == NULL || ps.mix_slot == NULL ||
        ps.mix_last == NULL) {
        stage_msg(r, "out of memory\n");
        goto out;
    }
    if (r->serve && cfg->serve->prefix_cache) {
        ps.hist = calloc(ns, sizeof(*ps.hist));
        ps.hist_n = calloc(ns, sizeof(*ps.hist_n));
        ps.last_use = calloc(ns, sizeof(*ps.last_use));
        if (ps.hist == NULL || ps.hist_n == NULL || ps.last_use == NULL) {
            stage_msg(r, "out of memory\n");
            goto out;
        }
    }
    if (r->serve) {
        fprintf(cfg->log,
                "plan: %u slot%s of %u KV-cache cells, %u group%s; a request waits in the "
                "queue for a free slot, and rides in the decode steps of the others, %u "
                "prompt tokens a step (continuous batching); the prefix cache is %s\n",
                ns, ns == 1 ? "" : "s", cfg->n_ctx, ps.groups, ps.groups == 1 ? "" : "s",
                r->n_chunk, ps.hist != NULL ? "on" : "off");
        ret = run_serve_start(r);
        if (ret != 0)
            goto out;
        serving = 1;
        ret = 1;
    } else if (r->conv) {
        fprintf(cfg->log,
                "plan: a conversation: one sequence of %u KV-cache cells; each message is "
                "answered with the turns before it in the cache (at most -n %u tokens a "
                "reply)\n",
                cfg->n_ctx, cfg->n_predict);
    } else {
        char note[96] = "";

        if (cfg->n_groups > ps.groups) /* groups of ceil(N / G) sequences fill fewer */
            snprintf(note, sizeof note, " (--groups %u: groups of %u sequence%s fill %u)",
                     cfg->n_groups, ps.gs, ps.gs == 1 ? "" : "s", ps.groups);
        fprintf(cfg->log,
                "plan: %zu prompt%s, %u sequence%s at a time (%u KV-cache cells each), %u "
                "group%s%s%s\n",
                r->n_par, r->n_par == 1 ? "" : "s", ns, ns == 1 ? "" : "s", cfg->n_ctx, ps.groups,
                ps.groups == 1 ? "" : "s", note,
                ps.groups > 1 && !cfg->pipeline ? " (with --pipeline off they do not overlap)"
                                                : "");
        if (r->n_chunk)
            fprintf(cfg->log,
                    "plan: continuous batching: a prompt admitted into a freed slot rides in "
                    "its group's decode steps, %u token%s a step\n",
                    r->n_chunk, r->n_chunk == 1 ? "" : "s");
    }
    for (;;) {
        uint32_t active = 0, rounds = UINT32_MAX, m, from = 0;
        int32_t unused;

        if (r->serve) { /* requests into free slots; with every slot free, wait for one */
            uint32_t j;

            serve_compact(&ps);
            for (j = 0; j < ns && ps.slot_seq[j] == 0; j++)
                ;
            if (run_serve_stopping(r) || serve_pull(&ps, 0, ns, j == ns) != 0)
                break;
            if (j == ns && ps.next_prompt == r->n_par)
                continue; /* woken with nothing to run: the server stops, or a stage is lost */
        }

        if (r->conv && ps.slot_seq[0] == 0) { /* the next message, once a reply has ended */
            int code;
            const int got = conv_next(&ps, &from, &code);

            if (got < 0) { /* said; the turns so far are summed up and written */
                conv_code = code;
                break;
            }
            if (got == 0)
                break;
            /* what the summary holds if this turn fails: the turns before it */
            turn0_prompt = n_prompt_tokens;
            turn0_gen = ps.n_gen;
            turn0_prefill = t_prefill;
            turn0_decode = t_decode;
        }

        /* admit prompts into free slots: at the start, and whenever no
         * sequence decodes, each is prefilled alone; once decoding has
         * begun, with continuous batching, it rides in the decode steps */
        while (ps.next_prompt < r->n_par) {
            uint32_t reused;
            const uint32_t j = pick_slot(&ps, 0, ns, ps.next_prompt, &reused);
            const size_t i = ps.next_prompt;

            if (j == UINT32_MAX)
                break;
            ps.next_prompt++;
            if (admit_begin(r, i) != 0)
                goto out;
            if (!r->conv) { /* a conversation's turn: `from`, conv_next's */
                from = reused;
                admit_reused(&ps, i, from);
            }
            if (started && r->n_chunk && any_decoding(&ps)) {
                ps.slot_seq[j] = i + 1;
                ps.fed[j] = from;
            } else if (prefill_alone(&ps, j, i, from, &t_prefill, &n_prompt_tokens) != 0) {
                if (r->conv) /* said; the turns before it are summed up and written */
                    goto turn_failed;
                goto out;
            }
        }
        /* a prompt part-way in with nothing decoding beside it: the rest alone */
        for (uint32_t j = 0; j < ns; j++)
            if (ps.slot_seq[j] != 0 && !decoding(&ps, j) && !any_decoding(&ps) &&
                prefill_alone(&ps, j, ps.slot_seq[j] - 1, ps.fed[j], &t_prefill,
                              &n_prompt_tokens) != 0)
                goto out;
        for (uint32_t j = 0; j < ns; j++) {
            if (decoding(&ps, j)) {
                const struct par_seq *q = &r->par[ps.slot_seq[j] - 1];
                const uint32_t left = (uint32_t)(q->n_max - q->n_gen);

                active++;
                if (left < rounds)
                    rounds = left;
            }
        }
        if (active == 0) {
            if (ps.next_prompt < r->n_par || r->conv || r->serve)
                continue; /* every admitted prompt ended at its first token */
            break;
        }
        if (rounds > PAR_BURST_MAX)
            rounds = PAR_BURST_MAX; /* the step list stays small; the next burst goes on */
        ps.ring = r->n_stages >= 2 && r->bounds[r->n_stages - 1].direct && !r->n_chunk;
        if (ps.ring && rounds > PAR_RING_ROUNDS)
            rounds = PAR_RING_ROUNDS;
        /* a burst of decode steps, until the first sequence reaches -n:
         * step k is group k mod G's, and waits for that group's step
         * before it (k - G), whose outputs fill its inputs; the groups'
         * steps overlap across the stages */
        m = rounds * ps.groups;
        ub = calloc(m, sizeof(*ub));
        if (ub == NULL) {
            stage_msg(r, "out of memory\n");
            goto out;
        }
        ps.ub = ub;
        ps.m = m;
        if (ps.ring) {
            free(ps.rsp);
            free(ps.rsmp);
            free(ps.rout);
            ps.rsp = calloc((size_t)m * 3 * ps.tstride, sizeof(int32_t));
            ps.rsmp = calloc((size_t)m * 6 * ps.ostride, sizeof(int32_t));
            ps.rout = calloc((size_t)m * ps.ostride, sizeof(int32_t));
            if (ps.rsp == NULL || ps.rsmp == NULL || ps.rout == NULL) {
                stage_msg(r, "out of memory\n");
                goto out;
            }
            for (uint32_t g = 0; g < ps.groups; g++)
                fill_ring(&ps, g, rounds);
        } else {
            for (uint32_t k = 0; k < m; k++)
                ub[k].after = k >= ps.groups ? k - ps.groups + 1 : 0;
            for (uint32_t g = 0; g < ps.groups; g++)
                fill_group(&ps, g, &ub[g]);
        }
        if (!window) {
            run_stats_window(r, 1);
            window = 1;
        }
        r->on_retire = burst_retire;
        r->on_retire_arg = &ps;
        t0 = run_now_s();
        ret = run_engine(r, ub, m, &unused);
        t_decode += run_now_s() - t0;
        started = 1;
        r->on_retire = NULL;
        r->on_retire_arg = NULL;
        free(ub);
        ub = NULL;
        ps.ub = NULL;
        if (ret != 0 || ps.failed) {
            ret = 1;
            if (r->conv) /* said; the turns before this one are summed up and written */
                goto turn_failed;
            goto out;
        }
        ret = 1;
    }
    goto summary;
turn_failed: /* a conversation's turn: the turns that ended are its output (the
                summary's and --ids-file's), their figures as the turn began */
    conv_code = 1;
    n_prompt_tokens = turn0_prompt;
    ps.n_gen = turn0_gen;
    t_prefill = turn0_prefill;
    t_decode = turn0_decode;
summary:
    if (window)
        run_stats_window(r, 0);
    for (size_t i = 0; r->conv && i < r->n_par; i++)
        n_turns += r->par[i].done;
    if (r->serve) { /* the summary at out, after the requests still running fail */
        ret = run_serve_stopping(r) == 1 ? 0 : 1; /* a signal; else a stage was lost (said) */
        goto out;
    }
    if (r->conv)
        fprintf(cfg->log,
                "summary: a conversation of %zu turn%s, %zu prompt token%s prefilled (each "
                "turn's new ones: the turns before it were in the KV cache), generated %zu "
                "token%s, load %.2f s, prefill %.1f tok/s, decode %.1f tok/s, stages %u\n",
                n_turns, n_turns == 1 ? "" : "s", n_prompt_tokens,
                n_prompt_tokens == 1 ? "" : "s", ps.n_gen, ps.n_gen == 1 ? "" : "s", t_load,
                t_prefill > 0 ? (double)n_prompt_tokens / t_prefill : 0.0,
                t_decode > 0 ? (double)(ps.n_gen - (ps.n_gen < n_turns ? ps.n_gen : n_turns)) /
                                   t_decode
                             : 0.0,
                r->n_stages);
    else
        fprintf(cfg->log,
                "summary: %zu sequence%s (%u at a time), prompt %zu token%s, generated %zu "
                "token%s, load %.2f s (%.1f MiB), prefill %.1f tok/s, decode %.1f tok/s (all "
                "sequences, %u step%s), stages %u\n",
                r->n_par, r->n_par == 1 ? "" : "s", ns, n_prompt_tokens + ps.mixed_tokens,
                n_prompt_tokens + ps.mixed_tokens == 1 ? "" : "s", ps.n_gen,
                ps.n_gen == 1 ? "" : "s", t_load, bytes / 1048576.0,
                t_prefill > 0 ? (double)n_prompt_tokens / t_prefill : 0.0,
                t_decode > 0 ? (double)(ps.n_gen - (ps.n_gen < r->n_par ? ps.n_gen : r->n_par)) /
                                   t_decode
                             : 0.0,
                ps.decode_steps, ps.decode_steps == 1 ? "" : "s", r->n_stages);
    if (ps.mixed_steps)
        fprintf(cfg->log,
                "summary: continuous batching: %zu prompt token%s rode in %u decode step%s "
                "(prefill tok/s counts the prompts prefilled alone)\n",
                ps.mixed_tokens, ps.mixed_tokens == 1 ? "" : "s", ps.mixed_steps,
                ps.mixed_steps == 1 ? "" : "s");
    if (ps.shrunk_steps)
        fprintf(cfg->log,
                "summary: %u of %u decode step%s carried fewer rows than the group's %u slot%s "
                "(only the sequences still decoding)\n",
                ps.shrunk_steps, ps.decode_steps, ps.decode_steps == 1 ? "" : "s", ps.gs,
                ps.gs == 1 ? "" : "s");
    if (ps.unshrunk_steps)
        fprintf(cfg->log,
                "summary: %u of %u decode step%s carried every slot's row though fewer "
                "sequences decoded: the graph limits (%s), or the session's memory, left no "
                "room for the smaller step shapes\n",
                ps.unshrunk_steps, ps.decode_steps, ps.decode_steps == 1 ? "" : "s",
                run_graphs_limit(r));
    if (cfg->stats)
        run_print_stats(r, ps.decode_steps);
    if (cfg->stats_json && run_write_stats_json(r, cfg->stats_json, ps.decode_steps) != 0) {
        run_msg(cfg, "--stats-json %s: cannot write: %s\n", cfg->stats_json, strerror(errno));
        goto out;
    }
    if (cfg->result) {
        struct baton_run_result *res = cfg->result;

        memset(res, 0, sizeof(*res));
        res->n_prompt = n_prompt_tokens;
        res->n_gen = ps.n_gen;
        res->t_load_s = t_load;
        res->t_prefill_s = t_prefill;
        res->t_decode_s = t_decode;
        res->n_stages = r->n_stages;
        res->n_ubatch = r->n_ubatch;
        res->decode_steps = ps.decode_steps;
        res->n_seq = ns;
        res->ring = r->ring_tokens > 0;
        for (uint32_t i = 0; i < r->n_stages; i++)
            for (uint32_t c = 1; c < BATON_CMD_LIMIT; c++)
                res->cmd[i][c] = r->stages[i].cmd[c];
        res->hidden_bytes_hub = r->hidden_bytes_hub;
        res->token_bytes = r->token_bytes;
        res->waits = r->waits;
        res->n_direct = r->n_direct;
    }
    if (cfg->ids_path && write_ids(r, cfg->ids_path) != 0) {
        run_msg(cfg, "--ids-file %s: cannot write: %s\n", cfg->ids_path, strerror(errno));
        goto out;
    }
    ret = conv_code; /* a conversation that could not go on: its exit code */
out:
    if (serving) { /* the requests still running fail (a line each), then the summary */
        serve_fail_running(r);
        fprintf(cfg->log,
                "summary: served %zu request%s (%zu prompt token%s prefilled alone, %zu in "
                "decode steps, %zu held by the prefix cache), generated %zu token%s, decode "
                "%.1f tok/s while decoding, stages %u\n",
                ps.n_ended, ps.n_ended == 1 ? "" : "s", n_prompt_tokens,
                n_prompt_tokens == 1 ? "" : "s", ps.mixed_tokens, ps.reused_tokens, ps.n_gen,
                ps.n_gen == 1 ? "" : "s", t_decode > 0 ? (double)ps.n_gen / t_decode : 0.0,
                r->n_stages);
    }
    free(ub);
    free(ps.slot_seq);
    free(ps.row_seq);
    free(ps.row_slot);
    free(ps.rows);
    free(ps.fed);
    free(ps.mix_slot);
    free(ps.mix_last);
    free(ps.tokens);
    free(ps.out);
    free(ps.rsp);
    free(ps.rsmp);
    free(ps.rout);
    free(ps.sp);
    free(ps.smp);
    for (uint32_t j = 0; ps.hist != NULL && j < ns; j++)
        free(ps.hist[j]);
    free(ps.hist);
    free(ps.hist_n);
    free(ps.last_use);
    return ret;
}
