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

#include <stdint.h>
#include <stdio.h>

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
    FILE *out;            /* streamed text (stdout) */
    FILE *log;            /* plan, progress, summary, errors (stderr) */
};

void baton_run_config_default(struct baton_run_config *cfg);

/* Runs the whole generation. Returns a process exit code: 0 success,
 * 1 runtime failure (message names the file, or the stage and endpoint),
 * 2 bad configuration. */
int baton_run(const struct baton_run_config *cfg);

#endif
