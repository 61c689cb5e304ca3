/* `baton gen-model` and `baton quantize`. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include "baton/status.h"
#include "cli/cli.h"
#include "core/types.h"
#include "model/genmodel.h"
#include "model/gguf.h"
#include "model/llama.h"
#include "model/quant_preset.h"

static int parse_type(const char *s, uint32_t *type)
{
    static const struct {
        const char *name;
        uint32_t type;
    } names[] = {{"f32", BATON_TYPE_F32},
                 {"f16", BATON_TYPE_F16},
                 {"bf16", BATON_TYPE_BF16},
                 {"q8_0", BATON_TYPE_Q8_0},
                 {"q4_0", BATON_TYPE_Q4_0},
                 {"q5_0", BATON_TYPE_Q5_0},
                 {"q5_1", BATON_TYPE_Q5_1},
                 {"q2_k", BATON_TYPE_Q2_K},
                 {"q3_k", BATON_TYPE_Q3_K},
                 {"q4_k", BATON_TYPE_Q4_K},
                 {"q5_k", BATON_TYPE_Q5_K},
                 {"q6_k", BATON_TYPE_Q6_K},
                 {"iq4_nl", BATON_TYPE_IQ4_NL},
                 {"iq4_xs", BATON_TYPE_IQ4_XS}};
    size_t i;

    for (i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        if (strcasecmp(s, names[i].name) == 0) { /* any case, as quantize's presets */
            *type = names[i].type;
            return 0;
        }
    }
    return -1;
}

/* Largest value of a shape option (--layers, --dim, ...): far above any real
 * model, and small enough that the generator's scratch of dim x max(vocab, ff,
 * dim) floats, in bytes, fits in 64 bits. */
#define GEN_DIM_MAX 1000000000u
/* --layers and --vocab have tighter limits: each layer is 9 tensors and
 * each token a vocabulary entry, written and loaded one by one, and a
 * generator asked for 10^9 of either ran out of memory only after seconds
 * of work (an adversarial review). 4096 layers and 2^21 tokens are far above
 * any real llama (128 layers, 256K tokens). */
#define GEN_LAYERS_MAX 4096u
#define GEN_VOCAB_MAX (1u << 21)

static void gen_usage(FILE *f)
{
    fputs("usage: baton gen-model --layers L --dim D --ff F --heads H [--kv-heads K]\n"
          "                       [--arch llama|qwen2|qwen3|gemma3] [--head-dim N]\n"
          "                       [--rope-base B] [--rope-freqs] [--swa N]\n"
          "                       [--swa-period P] [--rope-scale F]\n"
          "                       [--vocab N | --vocab-from FILE] [--type T] [--seed S]\n"
          "                       [--ctx N] -o FILE\n"
          "\n"
          "Writes a deterministic llama-family GGUF with random weights (same options, same\n"
          "bytes), for benchmarks and tests. llama.cpp loads it too.\n"
          "\n"
          "  --layers L        transformer blocks, 1..4096\n"
          "  --dim D           embedding width (multiple of 32 unless --type f32; of 256\n"
          "                    for q2_k..q6_k and iq4_xs; the mixes fall back where it\n"
          "                    is not)\n"
          "  --ff F            feed-forward width (as --dim)\n"
          "  --heads H         attention heads (D % H == 0 unless --head-dim; even head\n"
          "                    size)\n"
          "  --arch A          llama (default), qwen2 (Q/K/V biases, NeoX RoPE), qwen3\n"
          "                    (per-head Q/K norms, NeoX RoPE) or gemma3 (qwen3's norms,\n"
          "                    norms after attention and feed-forward, sliding-window\n"
          "                    layers, no output.weight: the head is the embedding)\n"
          "  --head-dim N      head size, written as attention.key_length (default D / H;\n"
          "                    H x N need not equal D, as in Qwen 3 and Gemma 3)\n"
          "  --rope-base B     rope.freq_base (default 10000 llama, 1000000 the others)\n"
          "  --rope-freqs      write rope_freqs.weight: Llama 3.1's rope scaling factors\n"
          "                    (factor 8, low/high frequency factors 1 and 4, original\n"
          "                    context 8192; llama only)\n"
          "  --swa N           gemma3: attention.sliding_window, the window of the\n"
          "                    sliding layers (default 512; 0: no key, no layer slides)\n"
          "  --swa-period P    gemma3: attention.sliding_window_pattern, layer l slides\n"
          "                    when l % P < P - 1 (no key by default: llama.cpp takes 6)\n"
          "  --rope-scale F    gemma3: rope.scaling.type linear with rope.scaling.factor\n"
          "                    F in [1e-6, 1e6] (Gemma 3 4B and larger: 8); default none\n"
          "  --kv-heads K      key/value heads (H % K == 0; default H)\n"
          "  --vocab N         synthetic vocabulary size, 300..2097152 (default 512)\n"
          "  --vocab-from FILE copy the tokenizer of another GGUF\n"
          "  --type T          f32, f16, bf16, q8_0, q4_0, q5_0, q5_1, q2_k, q3_k, q4_k,\n"
          "                    q5_k, q6_k, iq4_nl or iq4_xs for the matrices (default\n"
          "                    f32), or a mix of types chosen per matrix as llama.cpp's\n"
          "                    preset of that name does: q3_k_m, q4_k_m, q5_k_m\n"
          "                    (docs/QUANTIZE.md); names in any case\n"
          "  --seed S          weight seed (default 1)\n"
          "  --ctx N           <arch>.context_length (default 2048)\n"
          "  -o, --output FILE output file, replaced if it exists (written atomically)\n"
          "\n"
          "The model is built in memory before it is written: a shape larger than the\n"
          "memory available now (MemAvailable in /proc/meminfo, or the machine's RAM\n"
          "where that cannot be read) is refused.\n"
          "\n"
          "Exit status: 0 written, 1 the file cannot be written (or --vocab-from\n"
          "cannot be read or its tokenizer arrays are not of llama.cpp's element types,\n"
          "or the model would not fit in the memory available), 2 usage error or an\n"
          "impossible shape.\n",
          f);
}

int baton_cmd_gen_model(int argc, char **argv)
{
    enum { O_LAYERS = 256, O_DIM, O_FF, O_HEADS, O_KV, O_VOCAB, O_VFROM, O_TYPE, O_SEED, O_CTX,
           O_ARCH, O_HEAD_DIM, O_ROPE_BASE, O_ROPE_FREQS, O_SWA, O_SWA_PERIOD, O_ROPE_SCALE,
           O_HELP };
    static const struct option opts[] = {
        {"layers", required_argument, 0, O_LAYERS}, {"dim", required_argument, 0, O_DIM},
        {"ff", required_argument, 0, O_FF},         {"heads", required_argument, 0, O_HEADS},
        {"kv-heads", required_argument, 0, O_KV},   {"vocab", required_argument, 0, O_VOCAB},
        {"vocab-from", required_argument, 0, O_VFROM}, {"type", required_argument, 0, O_TYPE},
        {"seed", required_argument, 0, O_SEED},     {"ctx", required_argument, 0, O_CTX},
        {"arch", required_argument, 0, O_ARCH},     {"head-dim", required_argument, 0, O_HEAD_DIM},
        {"rope-base", required_argument, 0, O_ROPE_BASE},
        {"rope-freqs", no_argument, 0, O_ROPE_FREQS}, {"output", required_argument, 0, 'o'},
        {"swa", required_argument, 0, O_SWA},
        {"swa-period", required_argument, 0, O_SWA_PERIOD},
        {"rope-scale", required_argument, 0, O_ROPE_SCALE},
        {"help", no_argument, 0, O_HELP},           {0, 0, 0, 0}};
    struct baton_gen_model_config cfg;
    char err[512] = "";
    int c, rc, vocab_given = 0;

    memset(&cfg, 0, sizeof(cfg));
    cfg.n_vocab = 512;
    cfg.n_ctx = 2048;
    cfg.type = BATON_TYPE_F32;
    cfg.seed = 1;
    optind = 1;
    while ((c = getopt_long(argc, argv, "o:h", opts, NULL)) != -1) {
        uint32_t *dst = NULL, max = GEN_DIM_MAX;
        const char *name = NULL;

        switch (c) {
        case O_LAYERS: dst = &cfg.n_layer; name = "--layers"; max = GEN_LAYERS_MAX; break;
        case O_DIM: dst = &cfg.n_embd; name = "--dim"; break;
        case O_FF: dst = &cfg.n_ff; name = "--ff"; break;
        case O_HEADS: dst = &cfg.n_head; name = "--heads"; break;
        case O_KV: dst = &cfg.n_head_kv; name = "--kv-heads"; break;
        case O_VOCAB:
            dst = &cfg.n_vocab;
            name = "--vocab";
            max = GEN_VOCAB_MAX;
            vocab_given = 1;
            break;
        case O_CTX: dst = &cfg.n_ctx; name = "--ctx"; break;
        case O_VFROM: cfg.vocab_from = optarg; break;
        case O_ARCH:
            if (strcmp(optarg, "llama") == 0) {
                cfg.arch = BATON_ARCH_LLAMA;
            } else if (strcmp(optarg, "qwen2") == 0) {
                cfg.arch = BATON_ARCH_QWEN2;
            } else if (strcmp(optarg, "qwen3") == 0) {
                cfg.arch = BATON_ARCH_QWEN3;
            } else if (strcmp(optarg, "gemma3") == 0) {
                cfg.arch = BATON_ARCH_GEMMA3;
            } else {
                fprintf(stderr,
                        "baton gen-model: --arch: '%s' (want llama, qwen2, qwen3, gemma3)\n",
                        optarg);
                return 2;
            }
            break;
        case O_ROPE_FREQS: cfg.rope_freqs = 1; break;
        case O_HEAD_DIM: dst = &cfg.head_dim; name = "--head-dim"; max = 65536; break;
        case O_SWA: /* 0 is a value: no sliding window */
            if (baton_cli_parse_u32("baton gen-model", "--swa", optarg, 0, GEN_DIM_MAX,
                                    &cfg.n_swa) != 0)
                return 2;
            cfg.swa_given = 1;
            break;
        case O_SWA_PERIOD: dst = &cfg.swa_period; name = "--swa-period"; max = 65536; break;
        case O_ROPE_SCALE:
            if (baton_cli_parse_float("baton gen-model", "--rope-scale", optarg, 1e-6, 1e6, 0,
                                      &cfg.rope_scale) != 0)
                return 2;
            break;
        case O_ROPE_BASE: {
            if (baton_cli_parse_float("baton gen-model", "--rope-base", optarg, 1.0, 1e12, 0,
                                      &cfg.rope_base) != 0)
                return 2;
            break;
        }
        case O_TYPE:
            cfg.preset = BATON_PRESET_NONE;
            cfg.type = BATON_TYPE_F32;
            if (parse_type(optarg, &cfg.type) == 0)
                break;
            if (strcasecmp(optarg, "q2_k") != 0 && strcasecmp(optarg, "q6_k") != 0 &&
                baton_quant_preset_parse(optarg, &cfg.preset) == 0)
                break;
            fprintf(stderr,
                    "baton gen-model: --type: '%s' (want f32, f16, bf16, q8_0, q4_0, q5_0, q5_1, "
                    "q2_k, q3_k, q4_k, q5_k, q6_k, iq4_nl, iq4_xs, q3_k_m, q4_k_m, q5_k_m)\n",
                    optarg);
            return 2;
        case O_SEED:
            if (baton_cli_parse_u64("baton gen-model", "--seed", optarg, 0, UINT64_MAX,
                                    &cfg.seed) != 0)
                return 2;
            break;
        case 'o': cfg.out_path = optarg; break;
        case 'h':
        case O_HELP: gen_usage(stdout); return 0;
        default:
            fprintf(stderr, "(see `baton gen-model --help`)\n");
            return 2;
        }
        if (dst && baton_cli_parse_u32("baton gen-model", name, optarg, 1, max, dst) != 0)
            return 2;
    }
    if (optind < argc) {
        fprintf(stderr, "baton gen-model: unexpected argument '%s'\n", argv[optind]);
        return 2;
    }
    if (cfg.n_head_kv == 0)
        cfg.n_head_kv = cfg.n_head;
    if (!cfg.n_layer || !cfg.n_embd || !cfg.n_ff || !cfg.n_head || !cfg.out_path) {
        fprintf(stderr, "baton gen-model: --layers, --dim, --ff, --heads and -o are required;"
                        " missing:%s%s%s%s%s\n",
                cfg.n_layer ? "" : " --layers", cfg.n_embd ? "" : " --dim",
                cfg.n_ff ? "" : " --ff", cfg.n_head ? "" : " --heads",
                cfg.out_path ? "" : " -o");
        return 2;
    }
    if (baton_cli_empty_output("baton gen-model", "-o", cfg.out_path))
        return 2;
    /* the vocabulary is either synthetic (--vocab) or copied (--vocab-from):
     * one would silently override the other */
    if (vocab_given && cfg.vocab_from) {
        fprintf(stderr, "baton gen-model: --vocab and --vocab-from are alternatives; give one "
                        "(the vocabulary of --vocab-from FILE has its own size)\n");
        return 2;
    }
    if (!cfg.vocab_from && cfg.n_vocab < 300) {
        fprintf(stderr, "baton gen-model: --vocab must be at least 300 (259 special and byte "
                        "tokens + pieces)\n");
        return 2;
    }
    if (baton_cli_check_output("baton gen-model", "-o", cfg.out_path, 1, cfg.vocab_from,
                               "--vocab-from") != 0)
        return 1;
    rc = baton_gen_model(&cfg, err, sizeof(err));
    if (rc != 0) {
        fprintf(stderr, "baton gen-model: %s\n", err[0] ? err : baton_status_str(rc));
        return rc == BATON_E_INVAL ? 2 : 1;
    }
    fprintf(stderr,
            "baton gen-model: wrote %s (%u layer%s, dim %u, ff %u, %u head%s, %u kv head%s, %s)\n",
            cfg.out_path, cfg.n_layer, cfg.n_layer == 1 ? "" : "s", cfg.n_embd, cfg.n_ff,
            cfg.n_head, cfg.n_head == 1 ? "" : "s", cfg.n_head_kv, cfg.n_head_kv == 1 ? "" : "s",
            cfg.preset != BATON_PRESET_NONE ? baton_quant_preset_name(cfg.preset)
                                            : baton_type_name(cfg.type));
    return 0;
}

/* One line of the tensor count per type of the file just written, so a
 * preset's per-tensor choices (and its fallbacks for rows that are not a
 * multiple of 256) are visible, in type-id order: "baton quantize: by type:
 * f32 25 q4_k 96 q6_k 13". Nothing is printed if the file cannot be read back. */
static void print_type_counts(const char *path)
{
    uint64_t count[BATON_TYPE_ID_LIMIT] = {0};
    struct baton_gguf *g = NULL;
    char err[256];
    uint64_t i;

    if (baton_gguf_open(path, &g, err, sizeof err) != 0)
        return;
    for (i = 0; i < baton_gguf_n_tensors(g); i++) {
        struct baton_gguf_tensor t;

        if (baton_gguf_tensor_at(g, i, &t) == 0 && t.type < BATON_TYPE_ID_LIMIT)
            count[t.type]++;
    }
    baton_gguf_close(g);
    fputs("baton quantize: by type:", stderr);
    for (i = 0; i < BATON_TYPE_ID_LIMIT; i++)
        if (count[i])
            fprintf(stderr, " %s %llu", baton_type_name((uint32_t)i), (unsigned long long)count[i]);
    fputc('\n', stderr);
}

int baton_cmd_quantize(int argc, char **argv)
{
    static const struct option opts[] = {{"help", no_argument, 0, 'h'}, {0, 0, 0, 0}};
    /* by the number of operands given */
    static const char *const missing[3] = {"IN.gguf, OUT.gguf and TYPE", "OUT.gguf and TYPE",
                                           "TYPE"};
    static const char usage_line[] =
        "usage: baton quantize IN.gguf OUT.gguf "
        "q8_0|q4_0|q5_0|q5_1|f16|bf16|f32|q4_k_m|q5_k_m|q6_k|q3_k_m|q2_k|iq4_xs|iq4_nl\n";
    uint32_t type;
    int preset = BATON_PRESET_NONE;
    char err[512] = "";
    uint64_t n_conv = 0, n_kept = 0;
    const char *in, *out, *type_name, *canon;
    int c, n, rc;

    optind = 1;
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        if (c != 'h') { /* getopt said which option, as for the other commands */
            fputs(usage_line, stderr);
            return 2;
        }
        puts("usage: baton quantize IN.gguf OUT.gguf TYPE\n"
             "\n"
             "Copies a GGUF, converting every 2-D F32/F16/BF16 matrix to TYPE: to q8_0,\n"
             "q4_0, q5_0 or q5_1 those whose row length (ne0) is a multiple of 32 (the\n"
             "block size), to f16, bf16 or f32 any. Metadata, vectors and the other\n"
             "tensors are copied unchanged; it prints how many tensors were converted\n"
             "and kept, then the tensor count per type of OUT (\"by type: f32 N q8_0\n"
             "M\"), and warns when none was converted. OUT is written atomically (an\n"
             "existing OUT is replaced) and must not be IN.\n"
             "\n"
             "TYPE q4_k_m, q5_k_m, q6_k, q3_k_m or q2_k (q3_k, q4_k, q5_k: the _m ones;\n"
             "any case) is a mix, llama.cpp's preset of that name: each matrix gets the\n"
             "K-quant (or Q8_0) that preset picks for it, e.g. for q4_k_m Q4_K in general,\n"
             "Q6_K for output.weight (token_embd.weight where there is none, as in Gemma\n"
             "3) and for attn_v and ffn_down in some layers; rows that are not a\n"
             "multiple of 256 fall back as llama.cpp's do: to q4_0, q5_0, q5_1,\n"
             "q8_0 or f16 (docs/QUANTIZE.md). iq4_xs and iq4_nl are llama.cpp's presets\n"
             "of those names without an importance matrix: IQ4_XS (IQ4_NL) in general,\n"
             "Q6_K for output.weight, Q5_K for attn_v with 4 or more query heads per KV\n"
             "head and for ffn_down in the first eighth of the layers; iq4_xs rows that\n"
             "are not a multiple of 256 fall back to iq4_nl.\n"
             "general.file_type is set as llama-quantize sets it, for a type as for a\n"
             "preset (f32 0, f16 1, q4_0 2, q8_0 7, q5_0 8, q5_1 9, bf16 32; q4_k_m 15,\n"
             "iq4_xs 30, ...), and general.quantization_version to 2, when IN holds\n"
             "only F32, F16 and BF16 tensors; an IN with quantized tensors (kept as they\n"
             "are) keeps its own values.\n"
             "\n"
             "The converted tensors are held in memory until OUT is written: a\n"
             "conversion that would take more than the memory available now\n"
             "(MemAvailable in /proc/meminfo, or the machine's RAM where that cannot be\n"
             "read) is refused before it starts.\n"
             "\n"
             "Exit status: 0 written (also when nothing was converted), 1 IN cannot be\n"
             "read, a value cannot be converted (NaN, infinite, or too large for the\n"
             "type's binary16 scale; for f16 and bf16: finite but beyond the type's\n"
             "range, 65504 or about 3.39e38, as they keep NaN and infinities; the\n"
             "message names the tensor and element), the conversion would not fit in\n"
             "the memory available, or OUT cannot be written or is IN, 2 usage error.");
        return 0;
    }
    n = argc - optind;
    if (n != 3) {
        if (n < 3)
            fprintf(stderr, "baton quantize: missing %s\n", missing[n]);
        else
            fprintf(stderr, "baton quantize: unexpected argument '%s'\n", argv[optind + 3]);
        fputs(usage_line, stderr);
        return 2;
    }
    in = argv[optind];
    out = argv[optind + 1];
    type_name = argv[optind + 2];
    if (baton_cli_empty_output("baton quantize", "OUT.gguf", out)) {
        fputs(usage_line, stderr);
        return 2;
    }
    if (parse_type(type_name, &type) != 0 || type == BATON_TYPE_Q2_K ||
        (type >= BATON_TYPE_Q3_K && type <= BATON_TYPE_Q6_K) || type == BATON_TYPE_IQ4_NL ||
        type == BATON_TYPE_IQ4_XS) {
        /* the K and IQ4 names are llama-quantize's presets (q3_k, q4_k, q5_k:
         * its aliases of the _m ones), in any case */
        char lower[16];
        size_t i;

        for (i = 0; type_name[i] && i + 1 < sizeof lower; i++)
            lower[i] = (char)(type_name[i] >= 'A' && type_name[i] <= 'Z' ? type_name[i] + 32
                                                                         : type_name[i]);
        lower[i] = '\0';
        if (type_name[i] == '\0' && (strcmp(lower, "q3_k") == 0 || strcmp(lower, "q4_k") == 0 ||
                                     strcmp(lower, "q5_k") == 0))
            strcat(lower, "_m");
        if (type_name[i] != '\0' || baton_quant_preset_parse(lower, &preset) != 0) {
            fprintf(stderr,
                    "baton quantize: type '%s' (want q8_0, q4_0, q5_0, q5_1, f16, bf16, f32, "
                    "q4_k_m, q5_k_m, q6_k, q3_k_m, q2_k, iq4_xs, iq4_nl)\n",
                    type_name);
            return 2;
        }
        type = BATON_TYPE_F32;
    }
    if (baton_cli_check_output("baton quantize", "", out, 1, in, "") != 0)
        return 1;
    /* the lines below name the type or preset as baton spells it (Q4_K and
     * q4_k both say q4_k_m, the preset they stand for) */
    canon = preset != BATON_PRESET_NONE ? baton_quant_preset_name(preset) : baton_type_name(type);
    rc = baton_quantize_file(in, out, type, preset, err, sizeof(err), &n_conv, &n_kept);
    if (rc != 0) {
        fprintf(stderr, "baton quantize: %s\n", err[0] ? err : baton_status_str(rc));
        return 1;
    }
    /* a preset is a mix (its fallbacks may leave no tensor of its own
     * type: stories260K's rows of 288 all fall back from q6_k): "by" */
    fprintf(stderr, "baton quantize: wrote %s: %llu tensors converted %s %s%s, %llu kept (%s)\n",
            out, (unsigned long long)n_conv, preset != BATON_PRESET_NONE ? "by the" : "to", canon,
            preset != BATON_PRESET_NONE ? " preset" : "", (unsigned long long)n_kept,
            preset != BATON_PRESET_NONE ? "vectors, norms, or not f32/f16/bf16"
            : type == BATON_TYPE_F32 || type == BATON_TYPE_F16 || type == BATON_TYPE_BF16
                ? "vectors, other types, or already that type"
                : "vectors, other types, or rows not a multiple of 32");
    if (n_conv == 0)
        fprintf(stderr,
                "baton quantize: warning: no tensor was converted to %s; %s holds the tensors "
                "of %s unchanged\n",
                canon, out, in);
    print_type_counts(out);
    return 0;
}
