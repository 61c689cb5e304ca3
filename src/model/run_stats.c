/* Statistics of the decode window (run_internal.h): commands and bytes per
 * step on each link, the coordinator's waits, the peer counters the
 * servers keep; and the --ids-file output. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "model/run_internal.h"

void run_print_stats(struct run *r, uint32_t steps)
{
    uint32_t si, c;
    FILE *f = r->cfg->log;

    if (steps == 0)
        return;
    {
        /* what the boundaries did in the window, not what was set up */
        uint32_t direct = 0, hub = 0;

        for (si = 0; si + 1 < r->n_stages; si++) {
            direct += r->stages[si].copies_done > 0;
            hub += r->stages[si].hidden_gets > 0;
        }
        fprintf(f, "stats: per decode step (average over %u steps), %s path%s\n", steps,
                r->n_stages < 2        ? "no boundary, no"
                : direct && !hub       ? "direct"
                : direct               ? "partly direct"
                                       : "hub",
                r->cfg->p2p ? "" : " (--p2p off)");
    }
    fprintf(f, "  %-6s %-16s %10s %14s %14s\n", "stage", "command", "count", "request B",
            "reply B");
    for (si = 0; si < r->n_stages; si++) {
        for (c = 1; c < BATON_CMD_LIMIT; c++) {
            const struct baton_cmd_stats *st = &r->stages[si].cmd[c];

            if (st->count == 0)
                continue;
            fprintf(f, "  %-6u %-16s %10.2f %14.1f %14.1f\n", si + 1, baton_cmd_name(c),
                    (double)st->count / steps, (double)st->request_bytes / steps,
                    (double)st->reply_bytes / steps);
        }
    }
    fprintf(f, "  hidden-state bytes through the coordinator: %.1f per step\n",
            (double)r->hidden_bytes_hub / steps);
    fprintf(f, "  token id, position, sampling parameter and output token bytes: %.1f per step\n",
            (double)r->token_bytes / steps);
    fprintf(f, "  logits bytes: %.1f per step\n", (double)r->logits_bytes / steps);
    fprintf(f, "  coordinator waits for a reply it needs: %.2f per step (%s)\n",
            (double)r->waits / steps, r->cfg->pipeline ? "pipelined" : "--pipeline off");
    if (r->redos)
        fprintf(f, "  steps redone through the coordinator after a failed hand-off: %llu\n",
                (unsigned long long)r->redos);
    for (si = 0; si < r->n_stages; si++) {
        const struct stage_rt *s = &r->stages[si];

        fprintf(f, "  stage %u: hub hidden GET %.2f SET %.2f, direct copies done %.2f not done "
                   "%.2f, ",
                si + 1, (double)s->hidden_gets / steps, (double)s->hidden_sets / steps,
                (double)s->copies_done / steps, (double)s->copies_not_done / steps);
        if (s->peer_ok)
            fprintf(f, "peer bytes sent %.1f received %.1f per step (counted by the server, "
                       "this session only)\n",
                    (double)s->peer_sent / steps, (double)s->peer_recv / steps);
        else
            fprintf(f, "peer bytes n/a\n");
    }
}

static void json_cmds(FILE *f, const struct baton_cmd_stats *st, uint32_t steps)
{
    uint32_t c;
    int first = 1;

    fprintf(f, "{");
    for (c = 1; c < BATON_CMD_LIMIT; c++) {
        if (st[c].count == 0)
            continue;
        fprintf(f, "%s\"%s\": {\"count\": %.6g, \"request_bytes\": %.6g, \"reply_bytes\": %.6g}",
                first ? "" : ", ", baton_cmd_name(c), (double)st[c].count / steps,
                (double)st[c].request_bytes / steps, (double)st[c].reply_bytes / steps);
        first = 0;
    }
    fprintf(f, "}");
}

/* Writes the statistics of print_stats as JSON: per decode step averages,
 * commands keyed by their protocol names, per stage and summed. */
int run_write_stats_json(struct run *r, const char *path, uint32_t steps)
{
    FILE *f = fopen(path, "w");
    struct baton_cmd_stats sum[BATON_CMD_LIMIT];
    uint32_t si, c;
    const double d = steps ? (double)steps : 1.0;

    if (f == NULL)
        return -1;
    memset(sum, 0, sizeof(sum));
    for (si = 0; si < r->n_stages; si++) {
        for (c = 1; c < BATON_CMD_LIMIT; c++) {
            sum[c].count += r->stages[si].cmd[c].count;
            sum[c].request_bytes += r->stages[si].cmd[c].request_bytes;
            sum[c].reply_bytes += r->stages[si].cmd[c].reply_bytes;
        }
    }
    fprintf(f, "{\"decode_steps\": %u, \"stages\": %u, \"p2p\": %s, \"direct_boundaries\": %u, "
               "\"ubatch\": %u, \"slots\": %u, \"ring\": %s, \"ring_tokens\": %" PRIu64 ", "
               "\"parallel\": %u, \"groups\": %u, \"sampled\": %s,\n",
            steps, r->n_stages, r->cfg->p2p ? "true" : "false", r->n_direct, r->n_ubatch,
            r->n_slots, r->ring_tokens > 0 ? "true" : "false", r->ring_tokens,
            r->seqs ? r->n_seq : 1, r->seqs ? r->n_groups : 1, r->sampling ? "true" : "false");
    fprintf(f, " \"per_step\": {\n  \"commands\": ");
    json_cmds(f, sum, steps ? steps : 1);
    fprintf(f, ",\n  \"hidden_state_bytes\": %.6g, \"token_bytes\": %.6g, \"logits_bytes\": %.6g,\n",
            (double)r->hidden_bytes_hub / d, (double)r->token_bytes / d,
            (double)r->logits_bytes / d);
    fprintf(f, "  \"coordinator_waits\": %.6g, \"pipeline\": %s, \"redone_steps\": %llu,\n",
            (double)r->waits / d, r->cfg->pipeline ? "true" : "false",
            (unsigned long long)r->redos);
    fprintf(f, "  \"stages\": [\n");
    for (si = 0; si < r->n_stages; si++) {
        const struct stage_rt *s = &r->stages[si];

        fprintf(f, "   {\"stage\": %u, \"endpoint\": \"%s\", \"direct_to_next\": %s, \"commands\": ",
                si + 1, s->endpoint, si + 1 < r->n_stages && r->bounds[si].direct ? "true" : "false");
        json_cmds(f, s->cmd, steps ? steps : 1);
        fprintf(f, ",\n    \"hidden_gets\": %.6g, \"hidden_sets\": %.6g, \"copies_done\": %.6g, "
                   "\"copies_not_done\": %.6g, ",
                (double)s->hidden_gets / d, (double)s->hidden_sets / d,
                (double)s->copies_done / d, (double)s->copies_not_done / d);
        if (s->peer_ok)
            fprintf(f, "\"peer_bytes_sent\": %.6g, \"peer_bytes_received\": %.6g}",
                    (double)s->peer_sent / d, (double)s->peer_recv / d);
        else
            fprintf(f, "\"peer_bytes_sent\": null, \"peer_bytes_received\": null}");
        fprintf(f, "%s\n", si + 1 < r->n_stages ? "," : "");
    }
    fprintf(f, "  ]\n }\n}\n");
    return fclose(f) == 0 ? 0 : -1;
}

int run_write_ids(const char *path, const int32_t *prompt, size_t n_prompt, const int32_t *gen,
                     size_t n_gen, int with_gap, double min_gap)
{
    FILE *f = fopen(path, "w");
    size_t i;

    if (f == NULL)
        return -1;
    fprintf(f, "{\"prompt\": [");
    for (i = 0; i < n_prompt; i++)
        fprintf(f, "%s%d", i ? ", " : "", prompt[i]);
    fprintf(f, "], \"generated\": [");
    for (i = 0; i < n_gen; i++)
        fprintf(f, "%s%d", i ? ", " : "", gen[i]);
    fprintf(f, "]");
    if (with_gap)
        fprintf(f, ", \"min_top2_gap\": %.6g", min_gap);
    fprintf(f, "}\n");
    return fclose(f) == 0 ? 0 : -1;
}

