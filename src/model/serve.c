/* `baton serve` (run_internal.h, "serve.c"): the coordinator as an HTTP
 * server. libmicrohttpd serves each connection on its own thread; a
 * completion request is parsed there (serve_req.c), its prompt laid out
 * and tokenized, and it waits in a queue; the engine (run_parallel.c, the
 * only thread that talks to the stages) admits queued requests into free
 * KV-cache slots as sequences, beside the ones decoding (continuous
 * batching), and hands each token's text back here. A reply goes out whole
 * when its sequence ends, or piece by piece as server-sent events
 * ("stream": true), as OpenAI's API and llama.cpp's llama-server send them.
 * A request's stop strings end its sequence at the token whose text
 * completes one; its reply is cut before it (a stream holds back the text
 * that could still begin one).
 *
 * Ownership: a request is shared by its connection (until the reply has
 * been written) and the queue, then the engine (until its sequence ends);
 * refs counts them under the server's lock, and the last one frees it. */
#include <errno.h>
#include <jansson.h>
#include <limits.h>
#include <microhttpd.h>
#include <netdb.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sodium.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include "baton/status.h"
#include "model/chat.h"
#include "model/run_internal.h"
#include "model/serve_req.h"
#include "model/tokenizer.h"

struct serve_req {
    struct run_serve *srv;
    int refs;
    int chat, stream;
    uint64_t num;              /* the request's number, from 1 ("cmpl-N") */
    long long created;         /* Unix time of its arrival */
    double t0;                 /* run_now_s() of its arrival */
    struct run_serve_seq seq;  /* until the engine takes it (seq.ids then NULL) */
    size_t n_prompt, n_gen;
    size_t n_cached;           /* prompt ids its slot's cells held (the prefix cache) */
    char *text;                /* the reply's bytes so far */
    size_t len, cap;
    size_t sent;               /* stream: bytes of text sent */
    int done;                  /* 0 running or queued, 1 ended, -1 failed */
    int eog;                   /* ended at an end-of-generation token */
    char *stop[BATON_SERVE_MAX_STOP]; /* its stop strings (owned), n_stop of them */
    size_t stop_len[BATON_SERVE_MAX_STOP], n_stop;
    int stopped;               /* ended at a stop string: text cut before it */
    char *why;                 /* failed: the message its client gets */
    int gone;                  /* its client went away */
    int phase;                 /* stream: 0 nothing sent, 1 sending text, 2 all formatted */
    char *out;                 /* stream: formatted bytes not handed to MHD yet */
    size_t out_len, out_off;
    pthread_cond_t cond;       /* text came, or it ended */
};

struct run_serve {
    struct run *r;
    struct MHD_Daemon *d;
    pthread_mutex_t lock;
    pthread_cond_t work;       /* a request was queued, or the server stops */
    struct serve_req **queue;  /* a ring of q_cap: q_len from q_head */
    size_t q_head, q_len, q_cap;
    int stopping;              /* a signal came, or the engine ended */
    uint64_t next_num;
    unsigned char key_hash[crypto_generichash_BYTES];
    int has_key;
    char model[256];           /* the "model" replies name: the file's name */
    double last_call;          /* run_now_s() when the engine last ran a step */
    size_t active;             /* completion requests whose connection has not ended */
    size_t running;            /* requests the engine holds (taken, not ended) */
    struct sigaction old_int, old_term; /* restored when it stops */
    int handlers;
};

/* SIGINT or SIGTERM once the server listens (0: none). Before that they
 * keep their default action: a Ctrl-C during the upload ends the run. */
static volatile sig_atomic_t stop_signal;

static void on_signal(int sig)
{
    stop_signal = sig;
}

/* Whether the server stops (the server's lock held): a signal came, the
 * engine found a stage lost, or run_serve_stop began. */
static int stopping_locked(struct run_serve *srv)
{
    if (srv->stopping == 0 && stop_signal != 0) {
        srv->stopping = 1;
        fprintf(srv->r->cfg->log, "serve: %s: stopping (the requests in flight fail)\n",
                stop_signal == SIGINT ? "SIGINT" : "SIGTERM");
    }
    return srv->stopping;
}

/* One connection's request body as it arrives. */
struct serve_conn {
    char *body;
    size_t len, cap;
    int too_big;
    unsigned long long skipped; /* body bytes past the limit, dropped */
    int counted; /* in srv->active */
};

/* pthread_cond_timedwait for at most seconds (> 0) from now. */
static void wait_for(pthread_cond_t *cv, pthread_mutex_t *m, double seconds)
{
    const long long ns = seconds <= 0 ? 0 : (long long)(seconds * 1e9);
    struct timespec ts;

    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_sec += (time_t)(ns / 1000000000);
    ts.tv_nsec += (long)(ns % 1000000000);
    if (ts.tv_nsec >= 1000000000) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000;
    }
    pthread_cond_timedwait(cv, m, &ts);
}

static void req_free(struct serve_req *q)
{
    free(q->seq.ids);
    free(q->text);
    free(q->why);
    free(q->out);
    for (size_t i = 0; i < q->n_stop; i++)
        free(q->stop[i]);
    pthread_cond_destroy(&q->cond);
    free(q);
}

/* Drops a reference (the server's lock held). */
static void unref_locked(struct serve_req *q)
{
    if (--q->refs == 0)
        req_free(q);
}

/* ---- replies ---- */

/* Queues the JSON text s (len bytes, malloc'd, consumed; NULL: out of
 * memory, the connection closes) as the reply, status code status, with
 * the header name: value when name is not NULL. */
static enum MHD_Result reply_text_h(struct MHD_Connection *c, unsigned status, char *s,
                                    size_t len, const char *name, const char *value)
{
    struct MHD_Response *resp;
    enum MHD_Result ret;

    if (s == NULL)
        return MHD_NO;
    resp = MHD_create_response_from_buffer(len, s, MHD_RESPMEM_MUST_FREE);
    if (resp == NULL) {
        free(s);
        return MHD_NO;
    }
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, "application/json");
    if (name != NULL)
        MHD_add_response_header(resp, name, value);
    ret = MHD_queue_response(c, status, resp);
    MHD_destroy_response(resp);
    return ret;
}

/* reply_text_h of j (consumed) as compact JSON. */
static enum MHD_Result reply_json_h(struct MHD_Connection *c, unsigned status, json_t *j,
                                    const char *name, const char *value)
{
    char *s = j ? json_dumps(j, JSON_COMPACT) : NULL;

    json_decref(j);
    return reply_text_h(c, status, s, s ? strlen(s) : 0, name, value);
}

static enum MHD_Result reply_json(struct MHD_Connection *c, unsigned status, json_t *j)
{
    return reply_json_h(c, status, j, NULL, NULL);
}

/* An error reply in OpenAI's form: {"error": {"message", "type", "code"}};
 * a 405 names the method the path takes (Allow), a 401 the scheme
 * (WWW-Authenticate: Bearer), a 503 when to try again (Retry-After: 1). */
static enum MHD_Result reply_error(struct MHD_Connection *c, unsigned status, const char *fmt,
                                   ...) __attribute__((format(printf, 3, 4)));
static enum MHD_Result reply_error(struct MHD_Connection *c, unsigned status, const char *fmt,
                                   ...)
{
    char msg[512], *clean;
    size_t n;
    va_list ap;
    json_t *j;

    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    clean = baton_serve_utf8_clean(msg, strlen(msg), &n);
    if (clean == NULL)
        return MHD_NO;
    j = json_pack("{s:{s:s%,s:s,s:n}}", "error", "message", clean, n, "type",
                  status >= 500 ? "server_error"
                  : status == 401 ? "authentication_error"
                  : status == 404 ? "not_found_error"
                                  : "invalid_request_error",
                  "code");
    free(clean);
    return reply_json_h(c, status, j,
                        status == 405   ? MHD_HTTP_HEADER_ALLOW
                        : status == 401 ? MHD_HTTP_HEADER_WWW_AUTHENTICATE
                        : status == 503 ? MHD_HTTP_HEADER_RETRY_AFTER
                                        : NULL,
                        status == 405   ? (strstr(msg, "takes GET") ? "GET" : "POST")
                        : status == 401 ? "Bearer"
                                        : "1");
}

/* The finish_reason of a request that ended: "stop" at an end-of-generation
 * token or a stop string, "length" at its max_tokens or the context. */
static const char *finish_reason(const struct serve_req *q)
{
    return q->eog || q->stopped ? "stop" : "length";
}

/* A reply's "usage" object: OpenAI's fields, the prompt ids the prefix
 * cache held as prompt_tokens_details.cached_tokens. */
static json_t *usage_json(const struct serve_req *q)
{
    return json_pack("{s:I,s:I,s:I,s:{s:I}}", "prompt_tokens", (json_int_t)q->n_prompt,
                     "completion_tokens", (json_int_t)q->n_gen, "total_tokens",
                     (json_int_t)(q->n_prompt + q->n_gen), "prompt_tokens_details",
                     "cached_tokens", (json_int_t)q->n_cached);
}

/* The reply's object of a request that ended (not streamed). */
static json_t *completion_json(const struct serve_req *q, const char *model)
{
    size_t n;
    char *text = baton_serve_utf8_clean(q->text ? q->text : "", q->len, &n), id[40];
    const char *reason = finish_reason(q);
    json_t *j;

    if (text == NULL)
        return NULL;
    snprintf(id, sizeof id, "%s-%llu", q->chat ? "chatcmpl" : "cmpl", (unsigned long long)q->num);
    if (q->chat)
        j = json_pack("{s:s,s:s,s:I,s:s,s:[{s:i,s:{s:s,s:s%},s:s}],s:o}", "id", id, "object",
                      "chat.completion", "created", (json_int_t)q->created, "model", model,
                      "choices", "index", 0, "message", "role", "assistant", "content", text, n,
                      "finish_reason", reason, "usage", usage_json(q));
    else
        j = json_pack("{s:s,s:s,s:I,s:s,s:[{s:i,s:s%,s:n,s:s}],s:o}", "id", id, "object",
                      "text_completion", "created", (json_int_t)q->created, "model", model,
                      "choices", "index", 0, "text", text, n, "logprobs", "finish_reason",
                      reason, "usage", usage_json(q));
    free(text);
    return j;
}

/* A streamed chunk: text[0, n) (NULL: none), and the finish reason when
 * last, as "data: {...}\n\n" appended to q->out. 0 or -1. */
static int chunk(struct serve_req *q, const char *text, size_t n, int role, int last)
{
    const char *model = q->srv->model;
    size_t tn = 0;
    char *t = baton_serve_utf8_clean(text ? text : "", text ? n : 0, &tn), id[40], *s = NULL;
    json_t *choice = NULL, *j = NULL;
    int rc = -1;

    if (t == NULL)
        return -1;
    snprintf(id, sizeof id, "%s-%llu", q->chat ? "chatcmpl" : "cmpl", (unsigned long long)q->num);
    if (q->chat) {
        json_t *delta = json_object();

        if (delta != NULL && role)
            json_object_set_new(delta, "role", json_string("assistant"));
        if (delta != NULL && (text || role))
            json_object_set_new(delta, "content", json_stringn(t, tn));
        choice = json_pack("{s:i,s:o,s:o}", "index", 0, "delta", delta, "finish_reason",
                           last ? json_string(finish_reason(q)) : json_null());
    } else {
        choice = json_pack("{s:i,s:s%,s:n,s:o}", "index", 0, "text", t, tn, "logprobs",
                           "finish_reason",
                           last ? json_string(finish_reason(q)) : json_null());
    }
    if (choice != NULL)
        j = json_pack("{s:s,s:s,s:I,s:s,s:[o]}", "id", id, "object",
                      q->chat ? "chat.completion.chunk" : "text_completion", "created",
                      (json_int_t)q->created, "model", model, "choices", choice);
    if (j != NULL && last)
        json_object_set_new(j, "usage", usage_json(q));
    if (j != NULL)
        s = json_dumps(j, JSON_COMPACT);
    if (s != NULL) {
        const size_t add = strlen(s) + 8 + (last ? 14 : 0);
        char *o = realloc(q->out, q->out_len + add + 1);

        if (o != NULL) {
            q->out = o;
            q->out_len += (size_t)snprintf(o + q->out_len, add + 1, "data: %s\n\n%s", s,
                                           last ? "data: [DONE]\n\n" : "");
            rc = 0;
        }
    }
    free(s);
    json_decref(j);
    free(t);
    return rc;
}

/* How many bytes at the end of q's unsent text could begin one of its stop
 * strings (the server's lock held): they wait until the next piece says
 * whether a stop string follows, so that a stream never sends text that
 * the whole reply would not hold. (Its text holds no whole stop string:
 * run_serve_piece cuts it before one.) */
static size_t stop_held(const struct serve_req *q)
{
    const size_t unsent = q->len - q->sent;
    size_t held = 0;

    for (size_t i = 0; i < q->n_stop; i++) {
        /* the longest proper prefix of stop[i] that ends the text */
        for (size_t k = q->stop_len[i] - 1 < unsent ? q->stop_len[i] - 1 : unsent; k > held;
             k--) {
            if (memcmp(q->text + q->len - k, q->stop[i], k) == 0) {
                held = k;
                break;
            }
        }
    }
    return held;
}

/* A streamed reply's bytes (MHD's content reader): blocks until text
 * comes or the sequence ends. */
static ssize_t stream_read(void *cls, uint64_t pos, char *buf, size_t max)
{
    struct serve_req *q = cls;
    struct run_serve *srv = q->srv;
    ssize_t ret;

    (void)pos;
    pthread_mutex_lock(&srv->lock);
    for (;;) {
        size_t end;

        if (q->out_off < q->out_len) {
            const size_t n = q->out_len - q->out_off < max ? q->out_len - q->out_off : max;

            memcpy(buf, q->out + q->out_off, n);
            q->out_off += n;
            ret = (ssize_t)n;
            break;
        }
        q->out_off = q->out_len = 0;
        if (q->phase == 2) {
            ret = MHD_CONTENT_READER_END_OF_STREAM;
            break;
        }
        if (q->done < 0) { /* an error event, then the end */
            char *msg = NULL;
            json_t *j = json_pack("{s:{s:s,s:s,s:n}}", "error", "message",
                                  q->why ? q->why : "failed", "type", "server_error", "code");

            msg = j ? json_dumps(j, JSON_COMPACT) : NULL;
            json_decref(j);
            free(q->out);
            q->out = NULL;
            if (msg != NULL && asprintf(&q->out, "data: %s\n\ndata: [DONE]\n\n", msg) > 0)
                q->out_len = strlen(q->out);
            else
                q->out = NULL;
            free(msg);
            q->phase = 2;
            if (q->out == NULL) {
                ret = MHD_CONTENT_READER_END_WITH_ERROR;
                break;
            }
            continue;
        }
        if (q->phase == 0) { /* chat: the assistant's role comes first */
            q->phase = 1;
            if (q->chat && chunk(q, "", 0, 1, 0) != 0) {
                ret = MHD_CONTENT_READER_END_WITH_ERROR;
                break;
            }
            continue;
        }
        /* whole characters only (a piece may end inside one), and not what
         * could begin a stop string; all of it once the sequence has ended
         * (at a stop string, the text is cut before it already) */
        end = q->len;
        if (q->done == 0 && q->len > q->sent) {
            const size_t ready = q->len - q->sent - stop_held(q);

            end = q->sent + baton_serve_utf8_complete(q->text + q->sent, ready);
        }
        if (end > q->sent) {
            if (chunk(q, q->text + q->sent, end - q->sent, 0, 0) != 0) {
                ret = MHD_CONTENT_READER_END_WITH_ERROR;
                break;
            }
            q->sent = end;
            continue;
        }
        if (q->done > 0) {
            q->phase = 2;
            if (chunk(q, NULL, 0, 0, 1) != 0) {
                ret = MHD_CONTENT_READER_END_WITH_ERROR;
                break;
            }
            continue;
        }
        pthread_cond_wait(&q->cond, &srv->lock);
    }
    pthread_mutex_unlock(&srv->lock);
    return ret;
}

/* MHD is done with a streamed reply: its client may have gone. */
static void stream_free(void *cls)
{
    struct serve_req *q = cls;
    struct run_serve *srv = q->srv;

    pthread_mutex_lock(&srv->lock);
    if (q->done == 0)
        q->gone = 1;
    unref_locked(q);
    pthread_mutex_unlock(&srv->lock);
}

/* ---- requests ---- */

/* Appends ids[0, n) to *all (*n_all of *cap). 0 or BATON_E_NOMEM. */
static int append_ids(int32_t **all, size_t *n_all, size_t *cap, const int32_t *ids, size_t n)
{
    if (n > *cap - *n_all) {
        size_t c = (*n_all + n) * 2;
        int32_t *a = realloc(*all, c * sizeof(**all));

        if (a == NULL)
            return BATON_E_NOMEM;
        *all = a;
        *cap = c;
    }
    memcpy(*all + *n_all, ids, n * sizeof(**all));
    *n_all += n;
    return 0;
}

/* Text (with the template's spans when chat is not NULL) tokenized and
 * appended to *all. */
static int append_text(struct run *r, const char *text, size_t len, unsigned flags,
                       const struct baton_chat_prompt *chat, int32_t **all, size_t *n_all,
                       size_t *cap)
{
    int32_t *ids = NULL;
    size_t n = 0;
    int rc = run_tokenize_text(r, text, len, flags, chat, &ids, &n);

    if (rc == 0)
        rc = append_ids(all, n_all, cap, ids, n);
    free(ids);
    return rc;
}

/* The prompt's ids of request q: its text, or its messages laid out in the
 * model's chat template (the first user's turn with the system message,
 * then each assistant's text and each later user's turn as a
 * conversation's, baton_chat_format_next), BOS as the model says. 0 or a
 * status. */
static int prompt_ids(struct run *r, const struct baton_serve_req *q, int32_t **ids, size_t *n)
{
    const unsigned bos = baton_tokenizer_add_bos(r->tok) ? BATON_TOKENIZE_ADD_BOS : 0u;
    size_t cap = 0, k = 0;
    const char *sys = NULL;
    int rc = 0;

    *ids = NULL;
    *n = 0;
    if (!q->chat)
        return append_text(r, q->prompt, q->prompt_len, bos, NULL, ids, n, &cap);
    if (q->msgs[0].role == BATON_SERVE_SYSTEM)
        sys = q->msgs[k++].text;
    for (; k < q->n_msgs && rc == 0; k++) {
        const struct baton_serve_msg *m = &q->msgs[k];
        struct baton_chat_prompt p;

        if (m->role == BATON_SERVE_ASSISTANT) {
            /* as the template writes a reply (a space before it, trimmed),
             * tokenized as llama.cpp tokenizes the whole text */
            int fresh = 0;

            rc = baton_chat_format_reply(r->chat_tmpl, m->text, m->len, &p, &fresh);
            if (rc == 0)
                rc = append_text(r, p.text, p.len, fresh ? 0u : BATON_TOKENIZE_CONTINUE, NULL,
                                 ids, n, &cap);
            baton_chat_prompt_free(&p);
            continue;
        }
        rc = *n == 0 ? baton_chat_format(r->chat_tmpl, sys, m->text, m->len, &p)
                     : baton_chat_format_next(r->chat_tmpl, m->text, m->len, &p);
        if (rc == 0)
            rc = append_text(r, p.text, p.len, *n == 0 ? bos : BATON_TOKENIZE_CONTINUE, &p, ids,
                             n, &cap);
        baton_chat_prompt_free(&p);
    }
    if (rc != 0) {
        free(*ids);
        *ids = NULL;
        *n = 0;
    }
    return rc;
}

/* Builds request q from the parsed body (its stop strings move to q); 0,
 * or an error reply was queued (*ret its result). */
static int make_req(struct run_serve *srv, struct MHD_Connection *c, struct baton_serve_req *b,
                    struct serve_req **out, enum MHD_Result *ret)
{
    struct run *r = srv->r;
    const struct baton_run_config *cfg = r->cfg;
    struct serve_req *q;
    int32_t *ids = NULL, *grown;
    size_t n = 0, n_max;
    int rc;

    if (b->chat && !r->chat_ok) {
        *ret = reply_error(c, 400, "this model has no chat template baton recognizes ("
                                   BATON_CHAT_NAMES "): start baton serve with "
                                   "--chat-template NAME, or use /v1/completions");
        return -1;
    }
    const char *miss = b->chat && b->n_msgs > 0 && b->msgs[0].role == BATON_SERVE_SYSTEM
                           ? baton_chat_missing_marker(r->chat_tmpl, 1, r->tok)
                           : NULL;
    if (miss != NULL) {
        *ret = reply_error(c, 400, "the vocabulary has no token %s, which the %s layout needs "
                                   "for a system message",
                           miss, baton_chat_name(r->chat_tmpl));
        return -1;
    }
    rc = prompt_ids(r, b, &ids, &n);
    if (rc == BATON_E_LIMIT) {
        *ret = reply_error(c, 400, "the prompt laid out is more than %u bytes",
                           BATON_TOKENIZER_MAX_TEXT_BYTES);
        return -1;
    }
    if (rc != 0) {
        *ret = reply_error(c, rc == BATON_E_NOMEM ? 503 : 400, "cannot tokenize the prompt: %s",
                           baton_status_str(rc));
        return -1;
    }
    if (n == 0 || n >= cfg->n_ctx) {
        free(ids);
        if (n == 0)
            *ret = reply_error(c, 400, "the prompt gives no tokens");
        else
            *ret = reply_error(c, 400,
                               "the prompt is %zu tokens: a sequence holds %u positions, the "
                               "reply's included (baton serve --ctx)",
                               n, cfg->n_ctx);
        return -1;
    }
    n_max = b->has_max_tokens ? b->max_tokens : cfg->n_predict;
    if (n_max > cfg->n_predict)
        n_max = cfg->n_predict; /* the server's -n bounds every request */
    if (n_max > cfg->n_ctx - n)
        n_max = cfg->n_ctx - n; /* the context's room: finish_reason "length" */
    grown = realloc(ids, (n + n_max) * sizeof(*ids));
    q = calloc(1, sizeof(*q));
    if (grown == NULL || q == NULL || pthread_cond_init(&q->cond, NULL) != 0) {
        free(grown ? grown : ids);
        free(q);
        *ret = reply_error(c, 503, "out of memory");
        return -1;
    }
    q->srv = srv;
    q->refs = 1;
    q->chat = b->chat;
    q->stream = b->stream;
    q->created = (long long)time(NULL);
    q->t0 = run_now_s();
    q->seq.ids = grown;
    q->seq.n_prompt = q->n_prompt = n;
    q->seq.n_max = n_max;
    q->seq.temp = b->has_temperature ? b->temperature : cfg->temp;
    q->seq.top_p = b->has_top_p ? b->top_p : cfg->top_p;
    q->seq.top_k = b->has_top_k ? b->top_k : cfg->top_k;
    q->seq.seed = b->has_seed ? b->seed : cfg->seed;
    /* the stop strings are q's now (b's pointers to them cleared) */
    for (size_t i = 0; i < b->n_stop; i++) {
        q->stop[i] = b->stop[i];
        q->stop_len[i] = b->stop_len[i];
        b->stop[i] = NULL;
    }
    q->n_stop = b->n_stop;
    b->n_stop = 0;
    *out = q;
    return 0;
}

/* Queues q for the engine (a reference for it); 0, or -1 when the queue is
 * full or the server stops (q untouched). */
static int enqueue(struct run_serve *srv, struct serve_req *q, const char **why)
{
    int rc = -1;

    pthread_mutex_lock(&srv->lock);
    if (stopping_locked(srv)) {
        *why = "the server is stopping";
    } else if (srv->q_len == srv->q_cap) {
        *why = "busy";
    } else {
        srv->queue[(srv->q_head + srv->q_len++) % srv->q_cap] = q;
        q->num = ++srv->next_num;
        q->refs++;
        pthread_cond_signal(&srv->work);
        rc = 0;
    }
    pthread_mutex_unlock(&srv->lock);
    return rc;
}

/* Whether the client closed its side of connection c while its reply was
 * being made (POLLRDHUP: it will not read the reply). */
static int hung_up(struct MHD_Connection *c)
{
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
    struct pollfd p;

    if (ci == NULL)
        return 0;
    p.fd = ci->connect_fd;
    p.events = POLLRDHUP;
    p.revents = 0;
    return poll(&p, 1, 0) == 1 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR)) != 0;
}

static enum MHD_Result complete(struct run_serve *srv, struct MHD_Connection *c,
                                struct serve_conn *sc, int chat)
{
    struct baton_serve_req b;
    struct serve_req *q = NULL;
    enum MHD_Result ret = MHD_NO;
    const char *why = NULL;
    char err[256];
    int rc;

    if (sc->too_big)
        return reply_error(c, 413, "the request body is more than %u bytes",
                           BATON_SERVE_MAX_BODY);
    rc = baton_serve_req_parse(sc->body ? sc->body : "", sc->len, chat, &b, err, sizeof err);
    if (rc != 0)
        return reply_error(c, rc == BATON_E_NOMEM ? 503 : 400, "%s", err);
    rc = make_req(srv, c, &b, &q, &ret);
    baton_serve_req_free(&b);
    if (rc != 0)
        return ret;
    pthread_mutex_lock(&srv->lock);
    srv->active++; /* until its connection ends (completed): its reply has gone out */
    sc->counted = 1;
    pthread_mutex_unlock(&srv->lock);
    if (enqueue(srv, q, &why) != 0) {
        pthread_mutex_lock(&srv->lock);
        unref_locked(q);
        pthread_mutex_unlock(&srv->lock);
        if (strcmp(why, "busy") == 0)
            return reply_error(c, 503,
                               "busy: %u request%s wait%s for a free slot already (baton "
                               "serve --queue)",
                               srv->r->cfg->serve->queue,
                               srv->r->cfg->serve->queue == 1 ? "" : "s",
                               srv->r->cfg->serve->queue == 1 ? "s" : "");
        return reply_error(c, 503, "%s", why);
    }
    if (q->stream) {
        struct MHD_Response *resp =
            MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 16384, stream_read, q,
                                              stream_free);

        if (resp == NULL) {
            pthread_mutex_lock(&srv->lock);
            q->gone = 1;
            unref_locked(q);
            pthread_mutex_unlock(&srv->lock);
            return MHD_NO;
        }
        MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, "text/event-stream");
        MHD_add_response_header(resp, MHD_HTTP_HEADER_CACHE_CONTROL, "no-cache");
        ret = MHD_queue_response(c, 200, resp);
        MHD_destroy_response(resp); /* stream_free drops the connection's reference */
        return ret;
    }
    pthread_mutex_lock(&srv->lock);
    for (double next = run_now_s() + 0.2; q->done == 0;) {
        wait_for(&q->cond, &srv->lock, 0.2);
        /* every 0.2 s (the text's pieces wake it far more often) */
        if (q->done == 0 && !q->gone && run_now_s() >= next) {
            next = run_now_s() + 0.2;
            if (hung_up(c))
                q->gone = 1; /* its sequence ends at its next token: the slot is freed */
        }
    }
    pthread_mutex_unlock(&srv->lock);
    /* the engine no longer writes q */
    if (q->done > 0 && q->gone)
        ret = MHD_NO; /* cut short: its text is not the reply, the connection closes */
    else if (q->done < 0)
        ret = reply_error(c, 503, "%s", q->why ? q->why : "failed");
    else {
        json_t *j = completion_json(q, srv->model);

        ret = j ? reply_json(c, 200, j) : reply_error(c, 500, "cannot format the reply");
    }
    pthread_mutex_lock(&srv->lock);
    unref_locked(q);
    pthread_mutex_unlock(&srv->lock);
    return ret;
}

/* The piece of id (a control token's as its text) as a JSON value: a
 * string when its bytes are valid UTF-8 without NUL (jansson's json_stringn
 * checks the UTF-8), else the array of its bytes (as llama-server gives
 * it). */
static json_t *piece_json(const struct baton_tokenizer *tok, int32_t id)
{
    char small[256], *buf = small;
    size_t len = 0;
    json_t *j = NULL;
    int rc = baton_token_to_piece_ex(tok, id, BATON_TOKEN_NONE, BATON_DETOKENIZE_SPECIAL, small,
                                     sizeof small, &len);

    if (rc == BATON_E_LIMIT) {
        buf = malloc(len);
        rc = buf ? baton_token_to_piece_ex(tok, id, BATON_TOKEN_NONE, BATON_DETOKENIZE_SPECIAL,
                                           buf, len, &len)
                 : BATON_E_NOMEM;
    }
    if (rc != 0)
        goto out;
    if (memchr(buf, 0, len) == NULL)
        j = json_stringn(buf, len); /* NULL for bytes that are not UTF-8 */
    if (j == NULL) {
        j = json_array();
        for (size_t i = 0; j != NULL && i < len; i++)
            if (json_array_append_new(j, json_integer((unsigned char)buf[i])) != 0) {
                json_decref(j);
                j = NULL;
            }
    }
out:
    if (buf != small)
        free(buf);
    return j;
}

/* A reply's text, grown as it is written (bad: out of memory). */
struct text_buf {
    char *p;
    size_t len, cap;
    int bad;
};

static void tb_put(struct text_buf *b, const char *s, size_t n)
{
    if (b->bad)
        return;
    if (n > b->cap - b->len) {
        size_t cap = b->cap ? b->cap : 4096;
        char *q;

        while (cap - b->len < n)
            cap *= 2; /* bounded: a reply of a request's ids, at most some MiB */
        q = realloc(b->p, cap);
        if (q == NULL) {
            b->bad = 1;
            return;
        }
        b->p = q;
        b->cap = cap;
    }
    memcpy(b->p + b->len, s, n);
    b->len += n;
}

/* The reply of POST /tokenize: {"tokens": [ids]}, or with with_pieces
 * {"tokens": [{"id": ID, "piece": P}]}, into a malloc'd text of *len
 * bytes; NULL when out of memory. Written an id at a time (jansson for a
 * piece's escaping only): a megabyte of text is a million ids, and a
 * jansson object per id held ~700 bytes each until the reply was dumped. */
static char *tokens_text(const struct baton_tokenizer *tok, const int32_t *ids, size_t n,
                         int with_pieces, size_t *len)
{
    struct text_buf b = {0};

    tb_put(&b, "{\"tokens\":[", 11);
    for (size_t i = 0; i < n && !b.bad; i++) {
        char num[16];
        const int k = snprintf(num, sizeof num, "%s%d", i ? "," : "", (int)ids[i]);

        if (!with_pieces) {
            tb_put(&b, num, (size_t)k);
            continue;
        }
        json_t *piece = piece_json(tok, ids[i]);
        char *s = piece ? json_dumps(piece, JSON_COMPACT | JSON_ENCODE_ANY) : NULL;

        json_decref(piece);
        if (s == NULL) {
            b.bad = 1;
            break;
        }
        tb_put(&b, i ? ",{\"id\":" : "{\"id\":", i ? 7 : 6);
        tb_put(&b, num + (i ? 1 : 0), (size_t)k - (i ? 1 : 0));
        tb_put(&b, ",\"piece\":", 9);
        tb_put(&b, s, strlen(s));
        tb_put(&b, "}", 1);
        free(s);
    }
    tb_put(&b, "]}", 2);
    if (b.bad) {
        free(b.p);
        return NULL;
    }
    *len = b.len;
    return b.p;
}

/* The reply of POST /detokenize: {"content": TEXT}, the pieces' bytes
 * joined as baton_detokenize joins them, control tokens as their text
 * (llama-server's), with U+FFFD for bytes that are not valid UTF-8 (a
 * JSON string must be). Sets *status on an error: BATON_E_LIMIT when the
 * text would be over BATON_SERVE_MAX_DETOKENIZE_BYTES (a vocabulary may
 * hold long pieces: 131072 ids of a 70,000-byte piece asked for 9 GB;
 * four times the longest text /tokenize takes). */
static json_t *content_json(const struct baton_tokenizer *tok, const int32_t *ids, size_t n,
                            int *status)
{
    char small[256], *buf = small, *clean = NULL;
    size_t len = 0, clen = 0;
    json_t *j = NULL;
    int rc = baton_detokenize_ex(tok, ids, n, BATON_DETOKENIZE_SPECIAL, small, sizeof small, &len);

    if (rc == BATON_E_LIMIT && len <= BATON_SERVE_MAX_DETOKENIZE_BYTES) {
        buf = malloc(len);
        rc = buf ? baton_detokenize_ex(tok, ids, n, BATON_DETOKENIZE_SPECIAL, buf, len, &len)
                 : BATON_E_NOMEM;
    }
    *status = rc;
    if (rc == 0) {
        clean = baton_serve_utf8_clean(buf, len, &clen);
        j = clean ? json_pack("{s:s%}", "content", clean, clen) : NULL;
    }
    free(clean);
    if (buf != small)
        free(buf);
    return j;
}

/* POST /tokenize and /detokenize (llama-server's endpoints, serve_req.h):
 * the model's tokenizer on the connection's thread (it is read-only and
 * thread-safe); nothing goes to the engine, no slot is taken. */
static enum MHD_Result tokenize_reply(struct run_serve *srv, struct MHD_Connection *c,
                                      const struct serve_conn *sc, int detok)
{
    const struct baton_tokenizer *tok = srv->r->tok;
    const uint32_t n_vocab = baton_tokenizer_n_vocab(tok);
    struct baton_serve_tok_req t;
    enum MHD_Result ret;
    json_t *j = NULL;
    int32_t *ids = NULL;
    char *text = NULL;
    size_t n = 0, text_len = 0;
    char err[256];
    int rc;

    if (sc->too_big)
        return reply_error(c, 413, "the request body is more than %u bytes",
                           BATON_SERVE_MAX_BODY);
    rc = baton_serve_tok_parse(sc->body ? sc->body : "", sc->len, detok, &t, err, sizeof err);
    if (rc != 0)
        return reply_error(c, rc == BATON_E_NOMEM ? 503 : 400, "%s", err);
    if (detok) {
        for (size_t i = 0; i < t.n_tokens; i++)
            if ((uint32_t)t.tokens[i] >= n_vocab) {
                ret = reply_error(c, 400,
                                  "\"tokens\"[%zu] (%d) is outside the vocabulary of %u tokens",
                                  i, (int)t.tokens[i], n_vocab);
                baton_serve_tok_free(&t);
                return ret;
            }
        j = content_json(tok, t.tokens, t.n_tokens, &rc);
    } else {
        const unsigned flags =
            (t.add_special && baton_tokenizer_add_bos(tok) ? BATON_TOKENIZE_ADD_BOS : 0u) |
            (t.parse_special ? BATON_TOKENIZE_PARSE_SPECIAL : 0u);

        rc = run_tokenize_text(srv->r, t.content, t.content_len, flags, NULL, &ids, &n);
        if (rc == 0)
            text = tokens_text(tok, ids, n, t.with_pieces, &text_len);
    }
    if (detok && rc == BATON_E_LIMIT)
        ret = reply_error(c, 400, "the text of these ids is over %u bytes",
                          BATON_SERVE_MAX_DETOKENIZE_BYTES);
    else if (rc != 0)
        ret = reply_error(c, rc == BATON_E_NOMEM ? 503 : 400, "cannot %s: %s",
                          detok ? "detokenize the ids" : "tokenize the content",
                          baton_status_str(rc));
    else if (detok ? j == NULL : text == NULL)
        ret = reply_error(c, 503, "out of memory for the reply");
    else
        ret = detok ? reply_json(c, 200, j) : reply_text_h(c, 200, text, text_len, NULL, NULL);
    free(ids);
    baton_serve_tok_free(&t);
    return ret;
}

/* Whether the request carries the key ("Authorization: Bearer KEY"),
 * compared as hashes in constant time. */
static int authorized(const struct run_serve *srv, struct MHD_Connection *c)
{
    const char *h = MHD_lookup_connection_value(c, MHD_HEADER_KIND,
                                                MHD_HTTP_HEADER_AUTHORIZATION);
    unsigned char hash[crypto_generichash_BYTES];

    if (!srv->has_key)
        return 1;
    if (h == NULL || strncasecmp(h, "Bearer ", 7) != 0) /* a scheme's case does not count */
        return 0;
    h += 7;
    crypto_generichash(hash, sizeof hash, (const unsigned char *)h, strlen(h), NULL, 0);
    return sodium_memcmp(hash, srv->key_hash, sizeof hash) == 0;
}

static enum MHD_Result serve_handle(void *cls, struct MHD_Connection *c, const char *url,
                                    const char *method, const char *version,
                                    const char *upload, size_t *upload_size, void **con_cls)
{
    struct run_serve *srv = cls;
    struct serve_conn *sc = *con_cls;
    const int get = strcmp(method, MHD_HTTP_METHOD_GET) == 0;
    const int post = strcmp(method, MHD_HTTP_METHOD_POST) == 0;
    int path = 0; /* 1 health, 2 models, 3 completions, 4 chat, 5 tokenize, 6 detokenize */

    (void)version;
    if (strcmp(url, "/health") == 0)
        path = 1;
    else if (strcmp(url, "/v1/models") == 0)
        path = 2;
    else if (strcmp(url, "/v1/completions") == 0)
        path = 3;
    else if (strcmp(url, "/v1/chat/completions") == 0)
        path = 4;
    else if (strcmp(url, "/tokenize") == 0)
        path = 5;
    else if (strcmp(url, "/detokenize") == 0)
        path = 6;
    if (sc == NULL) { /* the headers: the body comes in later calls */
        sc = calloc(1, sizeof(*sc));
        if (sc == NULL)
            return MHD_NO;
        *con_cls = sc;
        if (path != 1 && !authorized(srv, c)) /* before any of its body is read */
            return reply_error(c, 401, "the key is missing or wrong: \"Authorization: "
                                       "Bearer KEY\" with the key of baton serve "
                                       "--api-key-file");
        return MHD_YES;
    }
    if (*upload_size != 0) {
        const size_t n = *upload_size;

        *upload_size = 0;
        if (sc->too_big) {
            /* read on to answer 413, up to a bound (16 MiB in all, the 2 MiB
             * before the refusal included): then the connection closes */
            sc->skipped += n;
            return sc->skipped > 7ull * BATON_SERVE_MAX_BODY ? MHD_NO : MHD_YES;
        }
        if (n > BATON_SERVE_MAX_BODY - sc->len) { /* read on, keep nothing: 413 */
            sc->too_big = 1;
            free(sc->body);
            sc->body = NULL;
            sc->len = sc->cap = 0;
            return MHD_YES;
        }
        if (sc->len + n > sc->cap) {
            size_t cap = (sc->len + n) * 2;
            char *b;

            if (cap > BATON_SERVE_MAX_BODY)
                cap = BATON_SERVE_MAX_BODY;
            b = realloc(sc->body, cap);
            if (b == NULL)
                return MHD_NO;
            sc->body = b;
            sc->cap = cap;
        }
        memcpy(sc->body + sc->len, upload, n);
        sc->len += n;
        return MHD_YES;
    }
    if (path == 0)
        return reply_error(c, 404, "no such path: GET /health and /v1/models, POST "
                                   "/v1/completions, /v1/chat/completions, /tokenize and "
                                   "/detokenize are served");
    if ((path <= 2 && !get) || (path >= 3 && !post)) {
        enum MHD_Result ret = reply_error(c, 405, "%s takes %s", url, path <= 2 ? "GET" : "POST");

        return ret;
    }
    if (path == 1) {
        size_t queued, running;

        pthread_mutex_lock(&srv->lock);
        queued = srv->q_len;
        running = srv->running;
        pthread_mutex_unlock(&srv->lock);
        return reply_json(c, 200,
                          json_pack("{s:s,s:i,s:I,s:I}", "status", "ok", "slots",
                                    (int)srv->r->n_seq, "running", (json_int_t)running,
                                    "queued", (json_int_t)queued));
    }
    if (path == 2)
        return reply_json(c, 200,
                          json_pack("{s:s,s:[{s:s,s:s,s:s}]}", "object", "list", "data", "id",
                                    srv->model, "object", "model", "owned_by", "baton"));
    if (path >= 5)
        return tokenize_reply(srv, c, sc, path == 6);
    return complete(srv, c, sc, path == 4);
}

static void completed(void *cls, struct MHD_Connection *c, void **con_cls,
                      enum MHD_RequestTerminationCode toe)
{
    struct run_serve *srv = cls;
    struct serve_conn *sc = *con_cls;

    (void)c;
    (void)toe;
    if (sc != NULL && sc->counted) {
        pthread_mutex_lock(&srv->lock);
        srv->active--;
        pthread_cond_broadcast(&srv->work);
        pthread_mutex_unlock(&srv->lock);
    }
    if (sc != NULL) {
        free(sc->body);
        free(sc);
    }
    *con_cls = NULL;
}

/* ---- the engine's side ---- */

struct serve_req *run_serve_take(struct run *r, int wait, struct run_serve_seq *seq)
{
    struct run_serve *srv = r->srv;
    struct serve_req *q = NULL;
    const uint32_t ka = r->cfg->keepalive_s ? r->cfg->keepalive_s : 30;

    pthread_mutex_lock(&srv->lock);
    if (wait)
        srv->last_call = run_now_s();
    while (srv->q_len == 0 && wait && !stopping_locked(srv)) {
        const double at = srv->last_call + ka, left = at - run_now_s();

        /* a tenth of a second at most: a signal's flag is looked at */
        wait_for(&srv->work, &srv->lock, left < 0.1 ? left : 0.1);
        if (srv->q_len == 0 && !stopping_locked(srv) && run_now_s() >= at) {
            int rc;

            pthread_mutex_unlock(&srv->lock);
            rc = run_keepalive(r); /* the stages' connections kept open */
            pthread_mutex_lock(&srv->lock);
            if (rc != 0) {
                srv->stopping = 2;
                break;
            }
            srv->last_call = run_now_s();
        }
    }
    /* a queued request whose client went away is dropped, not run */
    while (srv->q_len > 0 && srv->queue[srv->q_head]->gone) {
        struct serve_req *g = srv->queue[srv->q_head];

        srv->q_head = (srv->q_head + 1) % srv->q_cap;
        srv->q_len--;
        g->done = -1;
        fprintf(r->cfg->log, "serve: request %llu: its client went away while it waited\n",
                (unsigned long long)g->num);
        pthread_cond_broadcast(&g->cond);
        unref_locked(g);
    }
    if (srv->q_len > 0 && !stopping_locked(srv)) {
        q = srv->queue[srv->q_head];
        srv->q_head = (srv->q_head + 1) % srv->q_cap;
        srv->q_len--;
        *seq = q->seq;
        q->seq.ids = NULL; /* the engine's now */
        srv->running++;
    }
    pthread_mutex_unlock(&srv->lock);
    return q;
}

int run_serve_stopping(struct run *r)
{
    int s;

    pthread_mutex_lock(&r->srv->lock);
    s = stopping_locked(r->srv);
    pthread_mutex_unlock(&r->srv->lock);
    return s;
}

/* Where q's text first holds one of its stop strings (the start of the
 * earliest occurrence; of several starting there, any), looking only at
 * the occurrences that end past byte `from` (the text before it held
 * none); SIZE_MAX when none does. */
static size_t stop_find(const struct serve_req *q, size_t from)
{
    size_t first = SIZE_MAX;

    for (size_t i = 0; i < q->n_stop; i++) {
        const size_t n = q->stop_len[i], at = from > n - 1 ? from - (n - 1) : 0;
        const char *hit;

        if (n > q->len - at)
            continue;
        hit = memmem(q->text + at, q->len - at, q->stop[i], n);
        if (hit != NULL && (size_t)(hit - q->text) < first)
            first = (size_t)(hit - q->text);
    }
    return first;
}

int run_serve_piece(struct serve_req *q, const char *piece, size_t len)
{
    struct run_serve *srv = q->srv;
    int gone;

    pthread_mutex_lock(&srv->lock);
    gone = q->gone || q->stopped;
    if (!gone && len > q->cap - q->len) {
        const size_t cap = (q->len + len) * 2 + 64;
        char *t = realloc(q->text, cap);

        if (t == NULL) {
            gone = 1; /* the reply cannot grow: its sequence ends here */
        } else {
            q->text = t;
            q->cap = cap;
        }
    }
    if (!gone) {
        const size_t from = q->len;
        size_t cut;

        memcpy(q->text + q->len, piece, len);
        q->len += len;
        cut = q->n_stop > 0 ? stop_find(q, from) : SIZE_MAX;
        if (cut != SIZE_MAX) { /* the reply ends before the stop string */
            q->len = cut;
            q->stopped = 1;
            gone = 1;
        }
        pthread_cond_broadcast(&q->cond);
    }
    pthread_mutex_unlock(&srv->lock);
    return gone;
}

void run_serve_cached(struct serve_req *q, size_t cached)
{
    pthread_mutex_lock(&q->srv->lock);
    q->n_cached = cached;
    pthread_mutex_unlock(&q->srv->lock);
}

void run_serve_done(struct serve_req *q, int eog, size_t n_gen)
{
    struct run_serve *srv = q->srv;
    FILE *log = srv->r->cfg->log;

    pthread_mutex_lock(&srv->lock);
    q->done = 1;
    srv->running--;
    q->eog = eog;
    q->n_gen = n_gen;
    fprintf(log,
            "serve: request %llu (%s%s): prompt %zu token%s (%zu from the prefix cache), "
            "generated %zu (%s), %.2f s\n",
            (unsigned long long)q->num, q->chat ? "chat" : "completion",
            q->stream ? ", streamed" : "", q->n_prompt, q->n_prompt == 1 ? "" : "s",
            q->n_cached, n_gen,
            q->gone      ? "cut: its client went away"
            : q->stopped ? "stop string"
            : eog        ? "stop"
                         : "length",
            run_now_s() - q->t0);
    pthread_cond_broadcast(&q->cond);
    unref_locked(q);
    pthread_mutex_unlock(&srv->lock);
}

void run_serve_fail(struct serve_req *q, const char *why)
{
    struct run_serve *srv = q->srv;

    pthread_mutex_lock(&srv->lock);
    q->done = -1;
    srv->running--;
    free(q->why);
    q->why = strdup(why);
    fprintf(srv->r->cfg->log, "serve: request %llu (%s%s): prompt %zu token%s, failed: %s\n",
            (unsigned long long)q->num, q->chat ? "chat" : "completion",
            q->stream ? ", streamed" : "", q->n_prompt, q->n_prompt == 1 ? "" : "s", why);
    pthread_cond_broadcast(&q->cond);
    unref_locked(q);
    pthread_mutex_unlock(&srv->lock);
}

/* ---- start and stop ---- */

int baton_serve_read_key(const char *path, unsigned char hash[32], char *err, size_t cap)
{
    FILE *f = fopen(path, "r");
    char line[1024];
    size_t n;
    int bad = 0;

    if (f == NULL) {
        snprintf(err, cap, "%s", strerror(errno));
        return -1;
    }
    if (fgets(line, sizeof line, f) == NULL) {
        line[0] = '\0';
        if (ferror(f)) {
            snprintf(err, cap, "%s", strerror(errno));
            bad = 1;
        }
    }
    fclose(f);
    n = strcspn(line, "\r\n");
    line[n] = '\0';
    if (!bad && (n == 0 || n >= sizeof line - 1)) {
        snprintf(err, cap, "%s",
                 n == 0 ? "the first line (the key) is empty"
                        : "the first line (the key) is longer than 1022 bytes");
        bad = 1;
    }
    if (!bad)
        crypto_generichash(hash, 32, (const unsigned char *)line, n, NULL, 0);
    sodium_memzero(line, sizeof line);
    return bad ? -1 : 0;
}

/* The key of --api-key-file, hashed into srv. 0, or 1 after a message. */
static int load_key(struct run_serve *srv, const char *path)
{
    char err[256];

    if (baton_serve_read_key(path, srv->key_hash, err, sizeof err) != 0) {
        run_msg(srv->r->cfg, "--api-key-file %s: %s\n", path, err);
        return 1;
    }
    srv->has_key = 1;
    return 0;
}

/* --port-file: the port as a line, in a temporary file renamed over path
 * (a reader never sees half of it). 0, or 1 after a message. */
static int write_port(const struct baton_run_config *cfg, const char *path, unsigned port)
{
    char tmp[4096];
    FILE *f;

    if ((size_t)snprintf(tmp, sizeof tmp, "%s.tmp", path) >= sizeof tmp) {
        run_msg(cfg, "--port-file %s: path too long\n", path);
        return 1;
    }
    f = fopen(tmp, "w");
    if (f != NULL) {
        const int bad = fprintf(f, "%u\n", port) < 0;

        if (fclose(f) != 0 || bad)
            f = NULL;
    }
    if (f == NULL || rename(tmp, path) != 0) {
        run_msg(cfg, "--port-file %s: cannot write: %s\n", path, strerror(errno));
        return 1;
    }
    return 0;
}

/* host and port of "host:port" or "[v6]:port" into buffers. 0 or -1. */
static int split_listen(const char *s, char *host, size_t hcap, char *port, size_t pcap)
{
    const char *colon;
    size_t hl;

    if (s[0] == '[') {
        const char *close = strchr(s, ']');

        if (close == NULL || close[1] != ':')
            return -1;
        hl = (size_t)(close - s - 1);
        s++;
        colon = close + 1;
    } else {
        colon = strrchr(s, ':');
        if (colon == NULL)
            return -1;
        hl = (size_t)(colon - s);
    }
    if (hl == 0 || hl >= hcap || strlen(colon + 1) == 0 || strlen(colon + 1) >= pcap)
        return -1;
    memcpy(host, s, hl);
    host[hl] = '\0';
    strcpy(port, colon + 1);
    for (const char *p = port; *p; p++)
        if (*p < '0' || *p > '9')
            return -1;
    return atoi(port) <= 65535 ? 0 : -1;
}

int baton_serve_check_listen(const char *listen, char *err, size_t cap)
{
    char host[256], port[8];
    struct addrinfo hints, *ai = NULL;
    int rc;

    if (split_listen(listen, host, sizeof host, port, sizeof port) != 0) {
        snprintf(err, cap, "'%s' is not HOST:PORT or [IPV6]:PORT (port 0..65535)", listen);
        return -1;
    }
    memset(&hints, 0, sizeof hints);
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
    rc = getaddrinfo(host, port, &hints, &ai);
    if (rc != 0) {
        snprintf(err, cap, "%s: %s", listen, gai_strerror(rc));
        return -1;
    }
    freeaddrinfo(ai);
    return 0;
}

int run_serve_start(struct run *r)
{
    const struct baton_run_config *cfg = r->cfg;
    const struct baton_serve_config *sv = cfg->serve;
    struct run_serve *srv;
    struct addrinfo hints, *ai = NULL;
    char host[256], port[8];
    const char *base;
    const union MHD_DaemonInfo *info;
    unsigned flags =
        MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_ITC;
    int rc;

    if (split_listen(sv->listen, host, sizeof host, port, sizeof port) != 0) {
        run_msg(cfg, "--listen '%s' is not HOST:PORT or [IPV6]:PORT (port 0..65535)\n",
                sv->listen);
        return 2;
    }
    memset(&hints, 0, sizeof hints);
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
    rc = getaddrinfo(host, port, &hints, &ai);
    if (rc != 0) {
        run_msg(cfg, "--listen %s: %s\n", sv->listen, gai_strerror(rc));
        return 2;
    }
    srv = calloc(1, sizeof(*srv));
    if (srv == NULL || (srv->queue = calloc(sv->queue ? sv->queue : 1, sizeof(*srv->queue))) ==
                           NULL) {
        free(srv);
        freeaddrinfo(ai);
        run_msg(cfg, "out of memory\n");
        return 1;
    }
    srv->r = r;
    srv->q_cap = sv->queue ? sv->queue : 1;
    pthread_mutex_init(&srv->lock, NULL);
    pthread_cond_init(&srv->work, NULL);
    r->srv = srv;
    base = strrchr(cfg->model_path, '/');
    snprintf(srv->model, sizeof srv->model, "%s", base ? base + 1 : cfg->model_path);
    if (sv->api_key_path && load_key(srv, sv->api_key_path) != 0) {
        freeaddrinfo(ai);
        return 1;
    }
    {
        /* whichever thread a signal lands on only sets the flag, which the
         * engine looks at between steps and while it waits */
        struct sigaction sa;

        memset(&sa, 0, sizeof sa);
        sa.sa_handler = on_signal;
        sa.sa_flags = SA_RESTART;
        sigemptyset(&sa.sa_mask);
        stop_signal = 0;
        srv->handlers = sigaction(SIGINT, &sa, &srv->old_int) == 0 &&
                        sigaction(SIGTERM, &sa, &srv->old_term) == 0;
    }
    if (ai->ai_family == AF_INET6)
        flags |= MHD_USE_IPv6;
    srv->d = MHD_start_daemon(flags, 0, NULL, NULL, serve_handle, srv, MHD_OPTION_SOCK_ADDR,
                              ai->ai_addr, MHD_OPTION_CONNECTION_LIMIT,
                              (unsigned)(sv->max_conns ? sv->max_conns : 64),
                              MHD_OPTION_CONNECTION_TIMEOUT, 60u, MHD_OPTION_NOTIFY_COMPLETED,
                              completed, srv, MHD_OPTION_END);
    freeaddrinfo(ai);
    if (srv->d == NULL) {
        run_msg(cfg, "--listen %s: cannot listen there (in use, or not an address of this "
                     "host)\n",
                sv->listen);
        return 1;
    }
    info = MHD_get_daemon_info(srv->d, MHD_DAEMON_INFO_BIND_PORT);
    if (sv->port_file && write_port(cfg, sv->port_file, info ? info->port : 0) != 0)
        return 1;
    fprintf(cfg->log,
            "serve: listening on http://%s%s%s:%u (%u slot%s of %u positions, at most %u "
            "tokens a reply%s): POST /v1/completions%s, /tokenize, /detokenize, GET /health, "
            "/v1/models\n",
            strchr(host, ':') ? "[" : "", host, strchr(host, ':') ? "]" : "",
            info ? (unsigned)info->port : 0u, r->n_seq, r->n_seq == 1 ? "" : "s", cfg->n_ctx,
            cfg->n_predict, srv->has_key ? ", a key needed" : "",
            r->chat_ok ? ", /v1/chat/completions" : "");
    fflush(cfg->log);
    return 0;
}

void run_serve_stop(struct run *r, const char *why)
{
    struct run_serve *srv = r->srv;

    if (srv == NULL)
        return;
    pthread_mutex_lock(&srv->lock);
    if (why == NULL) /* a signal, or the engine ended on an error (said) */
        why = stopping_locked(srv) == 1
                  ? "the server is stopping (SIGINT or SIGTERM)"
                  : "the server stopped: a stage failed (baton serve's log says which)";
    if (!stopping_locked(srv))
        srv->stopping = 1;
    while (srv->q_len > 0) {
        struct serve_req *q = srv->queue[srv->q_head];

        srv->q_head = (srv->q_head + 1) % srv->q_cap;
        srv->q_len--;
        q->done = -1;
        q->why = strdup(why);
        pthread_cond_broadcast(&q->cond);
        unref_locked(q);
    }
    /* the failed requests' replies go out before the connections close:
     * new connections are refused meanwhile, for 3 s at most */
    if (srv->d != NULL) {
        const double until = run_now_s() + 3.0;
        const MHD_socket ls = MHD_quiesce_daemon(srv->d); /* ours to close */

        if (ls != MHD_INVALID_SOCKET)
            close(ls);
        while (srv->active > 0 && run_now_s() < until)
            wait_for(&srv->work, &srv->lock, 0.05);
    }
    pthread_mutex_unlock(&srv->lock);
    if (srv->d != NULL)
        MHD_stop_daemon(srv->d); /* waits for every connection's thread */
    if (srv->handlers) {
        sigaction(SIGINT, &srv->old_int, NULL);
        sigaction(SIGTERM, &srv->old_term, NULL);
    }
    pthread_cond_destroy(&srv->work);
    pthread_mutex_destroy(&srv->lock);
    free(srv->queue);
    free(srv);
    r->srv = NULL;
}
