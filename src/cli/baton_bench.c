/* `baton bench`: prefill and decode speed of a model on a set of servers. */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "baton/status.h"
#include "cli/cli.h"
#include "compute/compute.h"
#include "model/gguf.h"
#include "model/llama.h"
#include "model/run.h"
#include "wire/wire.h"

#define MAX_REPS 100

static void bench_usage(FILE *f)
{
    fputs("usage: baton bench --model FILE [--servers LIST] [--split P,...] [-p N] [-n N]\n"
          "                   [--ctx N] [--reps R] [--threads N] [--ubatch N]\n"
          "                   [--timeout MS]\n"
          "                   [--key FILE] [--p2p on|off] [--pipeline on|off] [--slots N]\n"
          "                   [--ring on|off] [--kv-type f32|f16]\n"
          "                   [--npl B,B,... [--groups G]] [--json FILE]\n"
          "\n"
          "Runs the model R times on a synthetic prompt of -p tokens, generating -n tokens\n"
          "greedily (EOS ignored), and prints the median and spread (min..max) of prefill\n"
          "tokens/s, decode tokens/s, TTFT, TPOT and load time, and the per-step command\n"
          "and byte table of the decode window.\n"
          "\n"
          "  -m FILE       the same as --model FILE\n"
          "  -p N          prompt tokens (default 128)\n"
          "  -n N          generated tokens (default 64, at least 2)\n"
          "  --ctx N       KV cache positions (default -p + -n + 8, at most the model's\n"
          "                llama.context_length); at least -p + -n\n"
          "  --reps R      repetitions (default 5)\n"
          "  --timeout MS  deadline of every server call (default 30000)\n"
          "  --json FILE   also write the figures as JSON\n"
          "  --npl B,...   batched decoding instead (up to 16 values, each 1..256): for\n"
          "                each B, B sequences of the same -p prompt (each prefilled alone)\n"
          "                then -n - 1 decode steps of B tokens (baton run --parallel B);\n"
          "                prints a row per B as llama-batched-bench does: PP, TG (-n), B,\n"
          "                N_KV (B x (PP + TG)), T_PP (every sequence's prefill, s), S_PP\n"
          "                (B x PP / T_PP), T_TG (the decode steps, s), S_TG (B x (TG - 1)\n"
          "                / T_TG: the first token comes from the prefill), T and S (all\n"
          "                tokens / T), TTFT (T_PP, ms: the last sequence's first token)\n"
          "                and TPOT (T_TG / (TG - 1), ms), medians over --reps; --ctx is\n"
          "                per sequence\n"
          "  --groups G    with --npl: pipeline groups, as for `baton run`\n"
          "  --servers, --split, --threads, --ubatch, --key, --p2p, --pipeline, --slots,\n"
          "  --ring, --kv-type  as for `baton run` (BATON_SERVERS and BATON_KEY_FILE\n"
          "                too)\n"
          "\n"
          "-p + -n may not exceed the model's context length (llama.context_length, 2048\n"
          "when the model has no usable one), as the model was not trained past it and\n"
          "attention time grows with the square of the context; a --ctx of at least\n"
          "-p + -n runs past it anyway.\n"
          "\n"
          "The table goes to stdout; the first repetition's model, plan, upload and summary\n"
          "lines to stderr, as are its errors. A later repetition that fails prints its\n"
          "error lines and which repetition it was, and ends the bench: the table then\n"
          "shows the repetitions that finished (\"reps 2 of 5 (repetition 3 failed)\"),\n"
          "and no --json file is written.\n"
          "\n"
          "Exit status: 0 success, 1 failure (model file, a server, a key file, a later\n"
          "repetition, or a --json FILE that cannot be created, checked before the first\n"
          "repetition), 2 usage error (a malformed --servers entry, or a --split that\n"
          "does not match the server count, is found before the model is read; -p + -n\n"
          "past the context, right after its header is read).\n",
          f);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;

    return x < y ? -1 : x > y;
}

struct figure {
    const char *name;
    const char *unit;
    double v[MAX_REPS];
    double med, lo, hi;
};

static void summarize(struct figure *f, uint32_t n)
{
    double s[MAX_REPS];

    memcpy(s, f->v, n * sizeof(double));
    qsort(s, n, sizeof(double), cmp_double);
    f->lo = s[0];
    f->hi = s[n - 1];
    f->med = n % 2 ? s[n / 2] : 0.5 * (s[n / 2 - 1] + s[n / 2]);
}

#define PROG "baton bench"

/* The lines of a repetition's log (text, NUL-terminated; NULL: none) that
 * baton_run wrote as errors and notices ("baton bench: ..."), to stderr;
 * the model, plan, upload and summary lines repeat the first repetition's. */
static void print_run_errors(const char *text)
{
    static const char prefix[] = PROG ": ";

    while (text && *text) {
        const char *nl = strchr(text, '\n');
        const size_t len = nl ? (size_t)(nl - text) + 1 : strlen(text);

        if (strncmp(text, prefix, sizeof prefix - 1) == 0)
            fprintf(stderr, "%.*s%s", (int)len, text, nl ? "" : "\n");
        text += len;
    }
}

#define NPL_MAX 16

/* --npl B,B,...: at most NPL_MAX values, each 1..256. 0 or -1 (said, with
 * the allowed range whatever the value: digits of any length, a sign, a
 * space or an empty value). */
static int parse_npl(const char *s, uint32_t *npl, uint32_t *n)
{
    const char *p = s;

    *n = 0;
    for (;;) {
        const char *c = strchr(p, ',');
        const size_t len = c ? (size_t)(c - p) : strlen(p);
        uint32_t v = 0;
        size_t i;

        if (*n == NPL_MAX) {
            fprintf(stderr, "baton bench: --npl: more than %u values (each 1..256)\n", NPL_MAX);
            return -1;
        }
        if (len == 0) {
            fprintf(stderr,
                    "baton bench: --npl: '%s' has an empty value (want B,B,..., up to %u "
                    "values, each 1..256)\n",
                    s, NPL_MAX);
            return -1;
        }
        for (i = 0; i < len && p[i] >= '0' && p[i] <= '9' && v <= 256; i++)
            v = v * 10 + (uint32_t)(p[i] - '0'); /* stops past 256: no wrap */
        if (i < len || v < 1 || v > 256) {
            /* digits past 256 (i < len) and anything else alike */
            fprintf(stderr,
                    "baton bench: --npl: '%.*s' is not a batch size in 1..256 (want B,B,..., "
                    "up to %u values)\n",
                    (int)(len > 64 ? 64 : len), p, NPL_MAX);
            return -1;
        }
        npl[(*n)++] = v;
        if (c == NULL)
            return 0;
        p = c + 1;
    }
}

/* The --npl table's header lines (cfg: the run's; local: in-process
 * stages). */
static void npl_header(const struct baton_run_config *cfg, const uint32_t *npl, uint32_t n_npl,
                       uint32_t reps, int local)
{
    const uint32_t pp = (uint32_t)cfg->n_prompt_ids, tg = cfg->n_predict;
    /* in-process stages have no peer links: neither path can be used */
    const char *on = local ? "on (not used: in-process stages)" : "on";
    char list[NPL_MAX * 5 + 1] = "", ub[16] = "auto";
    size_t at = 0;

    if (cfg->n_ubatch)
        snprintf(ub, sizeof ub, "%u", cfg->n_ubatch);
    for (uint32_t b = 0; b < n_npl; b++)
        at += (size_t)snprintf(list + at, sizeof list - at, "%s%u", b ? "," : "", npl[b]);
    printf("bench: %s, servers %s, split %s, npl %s, prompt %u, generated %u, reps %u, "
           "threads %u, ctx %u per sequence, groups %u (never more than B), ubatch "
           "%s, pipeline %s, p2p %s, slots %u, ring %s%s\n",
           cfg->model_path, cfg->servers, cfg->split ? cfg->split : "(equal)", list, pp, tg,
           reps, cfg->n_threads, cfg->n_ctx, cfg->n_groups ? cfg->n_groups : 1, ub,
           cfg->pipeline ? "on" : "off", cfg->p2p ? on : "off", cfg->n_slots,
           cfg->ring ? on : "off", cfg->kv_type == BATON_TYPE_F16 ? ", kv f16" : "");
    printf("  %5s %5s %4s %7s %9s %10s %9s %10s %9s %10s %9s %9s\n", "PP", "TG", "B", "N_KV",
           "T_PP s", "S_PP t/s", "T_TG s", "S_TG t/s", "T s", "S t/s", "TTFT ms", "TPOT ms");
}

/* The --npl table: a row per batch size, medians over reps. Returns the
 * exit code. */
static int bench_npl(struct baton_run_config *cfg, const uint32_t *npl, uint32_t n_npl,
                     uint32_t reps, const char *json)
{
    enum { T_PP, S_PP, T_TG, S_TG, T_ALL, S_ALL, TTFT, TPOT, N_FIG };
    static const char *const names[N_FIG] = {"t_pp", "s_pp", "t_tg", "s_tg", "t", "s",
                                             "ttft_ms", "tpot_ms"};
    struct figure fig[NPL_MAX][N_FIG];
    int ring[NPL_MAX]; /* every repetition's tokens went around the decode ring */
    int direct[NPL_MAX]; /* every repetition handed a hidden state over a peer link */
    const uint32_t pp = (uint32_t)cfg->n_prompt_ids, tg = cfg->n_predict;
    struct baton_run_result *res = cfg->result;
    const int local = strcmp(cfg->servers, "local") == 0;
    FILE *f;

    memset(fig, 0, sizeof fig);
    for (uint32_t b = 0; b < n_npl; b++) {
        ring[b] = direct[b] = 1;
        for (uint32_t r = 0; r < reps; r++) {
            char *log_text = NULL;
            size_t log_len = 0;
            FILE *rep_log = b == 0 && r == 0 ? NULL : open_memstream(&log_text, &log_len);
            double *v[N_FIG];
            int rc;

            cfg->n_copies = npl[b];
            cfg->n_parallel = npl[b];
            cfg->log = rep_log ? rep_log : stderr;
            rc = baton_run(cfg);
            if (rep_log)
                fclose(rep_log);
            if (rc != 0) {
                print_run_errors(log_text);
                free(log_text);
                /* the first run's error went to stderr as it happened: as
                 * without --npl, no line follows it */
                if (rep_log)
                    fprintf(stderr, "baton bench: --npl %u, repetition %u failed\n", npl[b],
                            r + 1);
                return rc;
            }
            /* the first repetition of a later batch size: its plan line
             * when the decode ring is off for it alone (--groups past
             * --slots; the first one's lines went to stderr already) */
            if (r == 0 && b > 0 && log_text && cfg->ring) {
                const char *l = strstr(log_text, "plan: decode ring off");

                if (l && (l == log_text || l[-1] == '\n'))
                    fprintf(stderr, "B=%u: %.*s\n", npl[b], (int)strcspn(l, "\n"), l);
            }
            free(log_text);
            ring[b] &= res->ring;
            direct[b] &= res->n_direct > 0;
            for (int k = 0; k < N_FIG; k++)
                v[k] = &fig[b][k].v[r];
            *v[T_PP] = res->t_prefill_s;
            *v[S_PP] = res->t_prefill_s > 0 ? (double)npl[b] * pp / res->t_prefill_s : 0;
            *v[T_TG] = res->t_decode_s;
            *v[S_TG] = res->t_decode_s > 0 ? (double)npl[b] * (tg - 1) / res->t_decode_s : 0;
            *v[T_ALL] = res->t_prefill_s + res->t_decode_s;
            *v[S_ALL] = *v[T_ALL] > 0 ? (double)npl[b] * (pp + tg) / *v[T_ALL] : 0;
            *v[TTFT] = res->t_prefill_s * 1e3;
            *v[TPOT] = tg > 1 ? res->t_decode_s * 1e3 / (tg - 1) : 0;
        }
        for (int k = 0; k < N_FIG; k++)
            summarize(&fig[b][k], reps);
        /* once the first batch size has run: a first run that fails (a
         * --split that does not fit, a server's limit) leaves no empty
         * table on stdout, as without --npl */
        if (b == 0)
            npl_header(cfg, npl, n_npl, reps, local);
        printf("  %5u %5u %4u %7u %9.3f %10.2f %9.3f %10.2f %9.3f %10.2f %9.2f %9.3f\n", pp, tg,
               npl[b], npl[b] * (pp + tg), fig[b][T_PP].med, fig[b][S_PP].med, fig[b][T_TG].med,
               fig[b][S_TG].med, fig[b][T_ALL].med, fig[b][S_ALL].med, fig[b][TTFT].med,
               fig[b][TPOT].med);
        fflush(stdout);
    }
    if (cfg->p2p && !local) { /* "p2p on" asks for it; where it was taken */
        printf("  direct path used:");
        for (uint32_t b = 0; b < n_npl; b++)
            printf(" B=%u %s", npl[b], direct[b] ? "yes" : "no");
        printf("\n");
    }
    if (cfg->ring && !local) { /* "ring on" asks for it; where it went around */
        printf("  decode ring used:");
        for (uint32_t b = 0; b < n_npl; b++)
            printf(" B=%u %s", npl[b], ring[b] ? "yes" : "no");
        printf("\n");
    }
    if (json == NULL)
        return 0;
    f = fopen(json, "w");
    if (f == NULL) {
        fprintf(stderr, "baton bench: --json %s: cannot write: %s\n", json, strerror(errno));
        return 1;
    }
    fputs("{\"model\": ", f);
    baton_cli_put_string(f, cfg->model_path, strlen(cfg->model_path), 1);
    fputs(", \"servers\": ", f);
    baton_cli_put_string(f, cfg->servers, strlen(cfg->servers), 1);
    fprintf(f, ", \"prompt\": %u, \"generated\": %u, \"ctx\": %u, \"reps\": %u, "
               "\"threads\": %u, \"groups\": %u, \"npl\": [",
            pp, tg, cfg->n_ctx, reps, cfg->n_threads, cfg->n_groups ? cfg->n_groups : 1);
    for (uint32_t b = 0; b < n_npl; b++) {
        fprintf(f, "%s{\"b\": %u, \"n_kv\": %u, \"p2p_used\": %s, \"ring\": %s", b ? ", " : "",
                npl[b], npl[b] * (pp + tg), direct[b] && !local ? "true" : "false",
                ring[b] ? "true" : "false");
        for (int k = 0; k < N_FIG; k++)
            fprintf(f, ", \"%s\": {\"median\": %.6g, \"min\": %.6g, \"max\": %.6g}", names[k],
                    fig[b][k].med, fig[b][k].lo, fig[b][k].hi);
        fputc('}', f);
    }
    fputs("]}\n", f);
    if (fclose(f) != 0) {
        fprintf(stderr, "baton bench: --json %s: cannot write: %s\n", json, strerror(errno));
        return 1;
    }
    return 0;
}

int baton_cmd_bench(int argc, char **argv)
{
    enum { O_MODEL = 256, O_SERVERS, O_SPLIT, O_REPS, O_JSON, O_THREADS, O_UBATCH, O_KEY,
           O_HELP, O_CTX, O_TIMEOUT, O_P2P, O_PIPELINE, O_SLOTS, O_RING, O_NPL, O_GROUPS,
           O_KV_TYPE };
    static const struct option opts[] = {
        {"model", required_argument, 0, O_MODEL}, {"servers", required_argument, 0, O_SERVERS},
        {"split", required_argument, 0, O_SPLIT}, {"reps", required_argument, 0, O_REPS},
        {"json", required_argument, 0, O_JSON},   {"threads", required_argument, 0, O_THREADS},
        {"ubatch", required_argument, 0, O_UBATCH}, {"key", required_argument, 0, O_KEY},
        {"help", no_argument, 0, O_HELP},         {"ctx", required_argument, 0, O_CTX},
        {"timeout", required_argument, 0, O_TIMEOUT}, {"p2p", required_argument, 0, O_P2P},
        {"pipeline", required_argument, 0, O_PIPELINE}, {"slots", required_argument, 0, O_SLOTS},
        {"ring", required_argument, 0, O_RING},   {"npl", required_argument, 0, O_NPL},
        {"groups", required_argument, 0, O_GROUPS}, {"kv-type", required_argument, 0, O_KV_TYPE},
        {0, 0, 0, 0}};
    struct baton_run_config cfg;
    struct baton_run_result *res = NULL;
    uint32_t npl[NPL_MAX], n_npl = 0;
    struct figure fig[5] = {{"prefill", "tok/s", {0}, 0, 0, 0},
                            {"decode", "tok/s", {0}, 0, 0, 0},
                            {"ttft", "ms", {0}, 0, 0, 0},
                            {"tpot", "ms", {0}, 0, 0, 0},
                            {"load", "s", {0}, 0, 0, 0}};
    uint32_t n_prompt = 128, n_gen = 64, reps = 5, r, i, c, n_vocab = 0, u;
    uint32_t n_done;     /* repetitions that finished */
    int failed_rc = 0;   /* a later repetition's exit code; 0: every one finished */
    char reps_text[64];  /* "5", or "1 of 5 (repetition 2 failed)" */
    const char *unused;  /* the header's word for an asked path that no step used */
    uint32_t n_ctx = 0; /* --ctx; 0: not given */
    struct baton_llama_hparams hp; /* hp.n_ctx_train: the context -p + -n may fill */
    const char *json = NULL, *servers_name = "--servers"; /* where cfg.servers came from */
    int32_t *ids = NULL;
    int ch, bad = 0, ret = 1;

    baton_run_config_default(&cfg);
    cfg.prog = PROG;
    baton_run_config_env(&cfg, &servers_name);
    optind = 1;
    while ((ch = getopt_long(argc, argv, "m:p:n:h", opts, NULL)) != -1) {
        switch (ch) {
        case 'm':
        case O_MODEL: cfg.model_path = optarg; break;
        case O_SERVERS: cfg.servers = optarg; servers_name = "--servers"; break;
        case O_SPLIT: cfg.split = optarg; break;
        case O_JSON: json = optarg; break;
        case O_KEY: cfg.key_path = optarg; cfg.key_name = "--key"; break;
        case 'p': bad = baton_cli_parse_u32(PROG, "-p", optarg, 1, 1u << 20, &n_prompt); break;
        case 'n': bad = baton_cli_parse_u32(PROG, "-n", optarg, 2, 1u << 20, &n_gen); break;
        case O_REPS: bad = baton_cli_parse_u32(PROG, "--reps", optarg, 1, MAX_REPS, &reps); break;
        case O_THREADS:
            bad = baton_cli_parse_u32(PROG, "--threads", optarg, 1, BATON_POOL_MAX_THREADS,
                                      &cfg.n_threads);
            break;
        case O_UBATCH:
            bad = baton_cli_parse_u32(PROG, "--ubatch", optarg, 1, 1u << 20, &cfg.n_ubatch);
            break;
        case O_CTX: bad = baton_cli_parse_u32(PROG, "--ctx", optarg, 1, UINT32_MAX, &n_ctx); break;
        case O_P2P: bad = baton_cli_parse_onoff(PROG, "--p2p", optarg, &cfg.p2p); break;
        case O_PIPELINE: bad = baton_cli_parse_onoff(PROG, "--pipeline", optarg, &cfg.pipeline); break;
        case O_RING: bad = baton_cli_parse_onoff(PROG, "--ring", optarg, &cfg.ring); break;
        case O_NPL: bad = parse_npl(optarg, npl, &n_npl); break;
        case O_GROUPS: bad = baton_cli_parse_u32(PROG, "--groups", optarg, 1, 8, &cfg.n_groups); break;
        case O_KV_TYPE: bad = baton_cli_parse_kv_type(PROG, "--kv-type", optarg, &cfg.kv_type); break;
        case O_SLOTS:
            bad = baton_cli_parse_u32(PROG, "--slots", optarg, 1, BATON_LLAMA_MAX_SLOTS,
                                      &cfg.n_slots);
            break;
        case O_TIMEOUT:
            bad = baton_cli_parse_u32(PROG, "--timeout", optarg, 1, 86400000u, &u);
            if (!bad)
                cfg.timeout_ms = (int)u;
            break;
        case 'h':
        case O_HELP: bench_usage(stdout); return 0;
        default:
            fprintf(stderr, "(see `baton bench --help`)\n");
            return 2;
        }
        if (bad)
            return 2;
    }
    if (optind < argc) {
        fprintf(stderr, "baton bench: unexpected argument '%s' (see --help)\n", argv[optind]);
        return 2;
    }
    if (cfg.model_path == NULL) {
        fprintf(stderr, "baton bench: --model FILE is required (see --help)\n");
        return 2;
    }
    /* an empty --key is a usage error, not "no key" (an empty
     * BATON_KEY_FILE still means none) */
    if (baton_cli_empty_output("baton bench", "--model", cfg.model_path) ||
        baton_cli_empty_output("baton bench", "--json", json) ||
        (cfg.key_name && strcmp(cfg.key_name, "--key") == 0 &&
         baton_cli_empty_output("baton bench", "--key", cfg.key_path)))
        return 2;
    /* n_prompt, n_gen <= 2^20: no sum below wraps */
    if (n_ctx != 0 && n_prompt + n_gen > n_ctx) {
        fprintf(stderr,
                "baton bench: -p %u + -n %u = %u positions exceed --ctx %u; lower -p or -n, or "
                "give --ctx %u or more\n",
                n_prompt, n_gen, n_prompt + n_gen, n_ctx, n_prompt + n_gen);
        return 2;
    }
    /* the endpoint list and the key file: a typo is found now, not after the
     * model has loaded */
    {
        const int pre = baton_run_precheck(&cfg, servers_name);

        if (pre != 0)
            return pre;
    }
    if (json && (baton_cli_check_output("baton bench", "--json", json, 0, cfg.model_path,
                                        "--model") != 0 ||
                 (cfg.key_path && baton_cli_check_output("baton bench", "--json", json, 0,
                                                         cfg.key_path,
                                                         cfg.key_name ? cfg.key_name : "--key") != 0)))
        return 1;
    {
        struct baton_gguf *g = NULL;
        char err[512];
        int rc;

        if (baton_gguf_open(cfg.model_path, &g, err, sizeof(err)) != 0) {
            fprintf(stderr, "baton bench: %s\n", err);
            return 1;
        }
        /* the hyperparameters as baton_run reads them: n_vocab and the
         * trained context (2048 assumed without a usable one) */
        rc = baton_llama_hparams_load(g, &hp, err, sizeof(err));
        baton_gguf_close(g);
        if (rc != 0) {
            fprintf(stderr, "baton bench: %s: %s\n", cfg.model_path, err);
            return 1;
        }
        if (hp.n_vocab <= 3) { /* the synthetic prompt draws ids from 3.. */
            fprintf(stderr, "baton bench: %s: a vocabulary of %u tokens is too small\n",
                    cfg.model_path, hp.n_vocab);
            return 1;
        }
        n_vocab = hp.n_vocab;
    }
    /* past the trained context a run still works, but each step attends to
     * every earlier position: a -p 100000 would run for hours on a model
     * trained for 2048. Refuse it unless --ctx asks for that context. */
    if (n_ctx == 0 && n_prompt + n_gen > hp.n_ctx_train) {
        char trained[96];

        baton_llama_ctx_train_desc(&hp, trained, sizeof trained);
        fprintf(stderr,
                "baton bench: -p %u + -n %u = %u positions exceed the model's context length "
                "(%s); lower -p or -n, or give --ctx %u or more to run past it\n",
                n_prompt, n_gen, n_prompt + n_gen, trained, n_prompt + n_gen);
        return 2;
    }
    /* synthetic prompt: BOS, then ids 3.. n_vocab-1 from a fixed LCG (never EOS) */
    ids = calloc(n_prompt, sizeof(*ids));
    res = calloc(1, sizeof(*res));
    if (ids == NULL || res == NULL) {
        fprintf(stderr, "baton bench: out of memory\n");
        goto out;
    }
    {
        uint32_t x = 12345;

        ids[0] = 1;
        for (i = 1; i < n_prompt; i++) {
            x = x * 1103515245u + 12345u;
            ids[i] = (int32_t)(3 + (x >> 8) % (n_vocab - 3));
        }
    }
    cfg.prompt = "";
    cfg.prompt_ids = ids;
    cfg.n_prompt_ids = n_prompt;
    cfg.n_predict = n_gen;
    cfg.n_ctx = n_ctx;
    cfg.ctx_origin = BATON_CTX_GIVEN;
    if (n_ctx == 0) { /* -p + -n fit n_ctx_train here */
        cfg.n_ctx = n_prompt + n_gen + 8;
        if (cfg.n_ctx > hp.n_ctx_train)
            cfg.n_ctx = hp.n_ctx_train;
        cfg.ctx_origin = BATON_CTX_BENCH;
    }
    cfg.ignore_eos = 1;
    cfg.quiet = 1;
    cfg.result = res;
    if (cfg.n_ubatch > cfg.n_ctx)
        cfg.n_ubatch = cfg.n_ctx;
    if (cfg.n_groups > 1 && n_npl == 0) {
        fprintf(stderr, "baton bench: --groups needs --npl\n");
        ret = 2;
        goto out;
    }
    if (n_npl > 0) {
        ret = bench_npl(&cfg, npl, n_npl, reps, json);
        goto out;
    }
    for (r = 0; r < reps; r++) {
        /* the first repetition logs to stderr as it goes (its errors
         * included, which end the bench); a later one into memory, whose
         * error and notice lines are printed only if it fails */
        char *log_text = NULL;
        size_t log_len = 0;
        FILE *rep_log = r == 0 ? NULL : open_memstream(&log_text, &log_len);
        int run_rc;

        cfg.log = rep_log ? rep_log : stderr;
        run_rc = baton_run(&cfg);
        if (rep_log)
            fclose(rep_log); /* log_text is complete (and NUL-terminated) now */
        if (run_rc != 0 && r > 0) {
            print_run_errors(log_text);
            if (r == 1)
                fprintf(stderr, "baton bench: repetition 2 of %u failed; repetition 1 ran\n",
                        reps);
            else
                fprintf(stderr,
                        "baton bench: repetition %u of %u failed; repetitions 1 to %u ran\n",
                        r + 1, reps, r);
        }
        free(log_text);
        if (run_rc != 0 && r == 0) {
            ret = run_rc; /* 2: a usage error found with the model (a split) */
            goto out;
        }
        if (run_rc != 0) {
            failed_rc = run_rc; /* the repetitions before it are still shown */
            break;
        }
        fig[0].v[r] = res->t_prefill_s > 0 ? (double)res->n_prompt / res->t_prefill_s : 0;
        fig[1].v[r] = res->t_decode_s > 0 ? (double)res->decode_steps / res->t_decode_s : 0;
        fig[2].v[r] = res->t_prefill_s * 1e3;
        fig[3].v[r] = res->decode_steps ? res->t_decode_s * 1e3 / res->decode_steps : 0;
        fig[4].v[r] = res->t_load_s;
    }
    n_done = r; /* every repetition, or those before the one that failed */
    for (i = 0; i < 5; i++)
        summarize(&fig[i], n_done);
    if (failed_rc == 0)
        snprintf(reps_text, sizeof reps_text, "%u", reps);
    else
        snprintf(reps_text, sizeof reps_text, "%u of %u (repetition %u failed)", n_done, reps,
                 n_done + 1);
    /* as the --npl header: in-process stages have no peer links; for servers
     * the plan lines above said why a path went unused */
    unused = strcmp(cfg.servers, "local") == 0 ? "on (not used: in-process stages)"
                                                : "on (not used)";
    printf("bench: %s, servers %s, split %s, prompt %u, generated %u, reps %s, threads %u, "
           "ctx %u, ubatch %u, pipeline %s, p2p %s, slots %u, ring %s%s\n",
           cfg.model_path, cfg.servers, cfg.split ? cfg.split : "(equal)", n_prompt, n_gen,
           reps_text, cfg.n_threads, cfg.n_ctx, res->n_ubatch, cfg.pipeline ? "on" : "off",
           !cfg.p2p ? "off" : res->n_direct ? "on" : unused, cfg.n_slots,
           !cfg.ring ? "off" : res->ring ? "on" : unused,
           cfg.kv_type == BATON_TYPE_F16 ? ", kv f16" : "");
    printf("  %-8s %12s %12s %12s  %s\n", "figure", "median", "min", "max", "unit");
    for (i = 0; i < 5; i++)
        printf("  %-8s %12.3f %12.3f %12.3f  %s\n", fig[i].name, fig[i].med, fig[i].lo, fig[i].hi,
               fig[i].unit);
    printf("  per decode step (last repetition%s, %u steps):\n",
           failed_rc ? " that finished" : "", res->decode_steps);
    printf("  %-6s %-16s %10s %14s %14s\n", "stage", "command", "count", "request B", "reply B");
    for (i = 0; i < res->n_stages && res->decode_steps; i++)
        for (c = 1; c < BATON_CMD_LIMIT; c++)
            if (res->cmd[i][c].count)
                printf("  %-6u %-16s %10.2f %14.1f %14.1f\n", i + 1, baton_cmd_name(c),
                       (double)res->cmd[i][c].count / res->decode_steps,
                       (double)res->cmd[i][c].request_bytes / res->decode_steps,
                       (double)res->cmd[i][c].reply_bytes / res->decode_steps);
    if (res->decode_steps) {
        printf("  hidden-state bytes through the coordinator: %.1f per step\n",
               (double)res->hidden_bytes_hub / res->decode_steps);
        printf("  coordinator waits for a reply it needs: %.2f per step\n",
               (double)res->waits / res->decode_steps);
    }
    if (json && failed_rc == 0) {
        FILE *f = fopen(json, "w");

        if (f == NULL) {
            fprintf(stderr, "baton bench: --json %s: cannot write: %s\n", json, strerror(errno));
            goto out;
        }
        fputs("{\"model\": ", f);
        baton_cli_put_string(f, cfg.model_path, strlen(cfg.model_path), 1);
        fputs(", \"servers\": ", f);
        baton_cli_put_string(f, cfg.servers, strlen(cfg.servers), 1);
        fprintf(f, ", \"prompt\": %u, \"generated\": %u, \"ctx\": %u, \"ubatch\": %u, "
                   "\"reps\": %u, \"threads\": %u, \"pipeline\": %s, \"p2p\": %s, "
                   "\"p2p_used\": %s, \"slots\": %u, \"ring\": %s, \"waits_per_step\": %.4g",
                n_prompt, n_gen, cfg.n_ctx, res->n_ubatch, reps, cfg.n_threads,
                cfg.pipeline ? "true" : "false", cfg.p2p ? "true" : "false",
                res->n_direct ? "true" : "false", cfg.n_slots, res->ring ? "true" : "false",
                res->decode_steps ? (double)res->waits / res->decode_steps : 0.0);
        for (i = 0; i < 5; i++)
            fprintf(f, ", \"%s\": {\"unit\": \"%s\", \"median\": %.6g, \"min\": %.6g, "
                       "\"max\": %.6g}",
                    fig[i].name, fig[i].unit, fig[i].med, fig[i].lo, fig[i].hi);
        fprintf(f, ", \"per_step\": [");
        for (i = 0; i < res->n_stages; i++) {
            int first = 1;

            fprintf(f, "%s{", i ? ", " : "");
            for (c = 1; c < BATON_CMD_LIMIT && res->decode_steps; c++) {
                if (!res->cmd[i][c].count)
                    continue;
                fprintf(f, "%s\"%s\": {\"count\": %.4g, \"request_bytes\": %.6g, "
                           "\"reply_bytes\": %.6g}",
                        first ? "" : ", ", baton_cmd_name(c),
                        (double)res->cmd[i][c].count / res->decode_steps,
                        (double)res->cmd[i][c].request_bytes / res->decode_steps,
                        (double)res->cmd[i][c].reply_bytes / res->decode_steps);
                first = 0;
            }
            fprintf(f, "}");
        }
        fprintf(f, "]}\n");
        if (fclose(f) != 0) {
            fprintf(stderr, "baton bench: --json %s: cannot write: %s\n", json, strerror(errno));
            goto out;
        }
    }
    ret = failed_rc;
out:
    free(ids);
    free(res);
    return ret;
}
