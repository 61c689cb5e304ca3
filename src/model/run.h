/* The coordinator: `baton run` loads a llama GGUF, places its layers on the
 * stage servers, and generates text one step at a time.
 *
 * Data flow per step (hub path): stage 1 gets token ids and positions, runs
 * its graph and returns its hidden state; each next stage gets that hidden
 * state (SET_TENSOR), runs, and the last stage returns the argmax token id
 * (greedy) or the logits (sampling). Every request to a stage is pipelined:
 * one round trip per stage per step.
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
    uint64_t token_bytes;      /* token ids, positions, argmax, logits, decode window */
};

struct baton_run_config {
    const char *model_path;
    const char *servers;  /* "host:port,host:port" or "local" */
    const char *split;    /* proportions, e.g. "1,1,1"; NULL = one part per server */
    const char *prompt;
    uint32_t n_predict;   /* tokens to generate (stops earlier at EOS) */
    uint32_t n_ctx;       /* KV cache positions */
    uint32_t n_ubatch;    /* prompt tokens per prefill step (1 = token by token) */
    float temp;           /* 0 = greedy (argmax on the last stage) */
    uint32_t top_k;
    float top_p;
    uint64_t seed;
    uint32_t n_threads;   /* compute threads of in-process stages */
    int timeout_ms;       /* deadline of every call to a server */
    int stats;            /* print per-step command/byte statistics */
    int quiet;            /* no streamed text (tests) */
    int report_gap;       /* fetch logits each step; write the smallest top-2 gap to ids_path */
    int ignore_eos;       /* keep generating past EOS (benchmarks, tests) */
    const char *ids_path; /* when set, write prompt and generated ids as JSON */
    const char *key_path; /* client key file (baton keygen): authenticate to every
                             server (in-process stages too); NULL = none */
    const int32_t *prompt_ids; /* when set, these ids are the prompt (text is ignored) */
    size_t n_prompt_ids;
    struct baton_run_result *result; /* when set, filled on success */
    FILE *out;            /* streamed text (stdout) */
    FILE *log;            /* plan, progress, summary, errors (stderr) */
};

void baton_run_config_default(struct baton_run_config *cfg);

/* Runs the whole generation. Returns a process exit code: 0 success,
 * 1 runtime failure (message names the file, or the stage and endpoint),
 * 2 bad configuration. */
int baton_run(const struct baton_run_config *cfg);

#endif
