/* Pre-tokenizers and GPT-2's byte-to-unicode mapping (see tokenizer_pre.h). */
#define PCRE2_CODE_UNIT_WIDTH 8
#include "model/tokenizer_pre.h"

#include <pcre2.h>
#include <stdlib.h>
#include <string.h>

#include "baton/status.h"
#include "model/gguf.h"

#define MAX_STAGES 4

struct baton_pretok {
    pcre2_code *code[MAX_STAGES];
    size_t n;
};

/* Unicode White_Space: PCRE2's \s under UCP is \p{Z} plus \t\n\v\f\r,
 * which lacks only U+0085. */
#define WS "\\s\\x{85}"
#define S_ "[" WS "]"
#define NS "[^" WS "]"

/* Contractions, case-insensitive in the Llama 3 and Qwen2 patterns
 * ("(?i:'s|'t|...)"), spelled with classes so that only ASCII letters
 * fold. */
#define CONTRACTIONS_CI "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])"

static const char k_gpt2[] = "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^" WS
                             "\\p{L}\\p{N}]+|" S_ "+(?!" NS ")|" S_ "+";

static const char k_llama3[] = CONTRACTIONS_CI "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}"
                                               "| ?[^" WS "\\p{L}\\p{N}]+[\\r\\n]*|" S_
                                               "*[\\r\\n]+|" S_ "+(?!" NS ")|" S_ "+";

static const char k_qwen2[] = CONTRACTIONS_CI "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}"
                                              "| ?[^" WS "\\p{L}\\p{N}]+[\\r\\n]*|" S_
                                              "*[\\r\\n]+|" S_ "+(?!" NS ")|" S_ "+";

/* Mistral's tekken (tokenizer.json): a word is an optional non-letter
 * lead, then "upper" letters and "lower" ones, or the reverse; tokenizer.json
 * says [\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}] and [\p{Ll}\p{Lm}\p{Lo}\p{M}], but
 * llama.cpp runs it (and so baton, to give its ids) with "a letter other than
 * a-z" and "a letter other than A-Z": every letter outside ASCII is both,
 * and a combining mark is neither. */
#define UPPER "[^\\P{L}a-z]" /* one class, not a group with a lookahead: PCRE2 keeps */
#define LOWER "[^\\P{L}A-Z]" /* a backtracking frame per repeat of a group */
static const char k_tekken[] = "[^\\r\\n\\p{L}\\p{N}]?" UPPER "*" LOWER "+|[^\\r\\n\\p{L}\\p{N}]?"
                               UPPER "+" LOWER "*|\\p{N}| ?[^" WS "\\p{L}\\p{N}]+[\\r\\n/]*|"
                               S_ "*[\\r\\n]+|" S_ "+(?!" NS ")|" S_ "+";

static const char k_digit[] = "\\p{N}";
static const char k_punct_runs[] = "[\\p{P}$+<=>^~|]+";
static const char k_number_runs[] = "\\p{N}+";
static const char k_three_digits[] = "[0-9][0-9][0-9]";

/* The names llama.cpp's loader accepts for these kinds, with its flags. */
static const struct {
    const char *name;
    struct baton_pretok_info info;
} k_names[] = {
    {"default", {BATON_PRETOK_DEFAULT, 0, 0}},
    {"llama-bpe", {BATON_PRETOK_LLAMA3, 1, 1}}, /* Llama 3.x */
    {"llama3", {BATON_PRETOK_LLAMA3, 1, 1}},
    {"llama-v3", {BATON_PRETOK_LLAMA3, 1, 1}},
    {"falcon3", {BATON_PRETOK_LLAMA3, 1, 1}},
    {"falcon-h1", {BATON_PRETOK_LLAMA3, 1, 1}},
    {"pixtral", {BATON_PRETOK_LLAMA3, 1, 1}},
    {"midm-2.0", {BATON_PRETOK_LLAMA3, 1, 1}},
    {"lfm2", {BATON_PRETOK_LLAMA3, 1, 1}},
    {"dbrx", {BATON_PRETOK_LLAMA3, 0, 0}},
    {"smaug-bpe", {BATON_PRETOK_LLAMA3, 0, 0}},
    {"qwen2", {BATON_PRETOK_QWEN2, 0, 0}}, /* Qwen 2, 2.5, 3 */
    {"deepseek-r1-qwen", {BATON_PRETOK_QWEN2, 0, 0}},
    {"kormo", {BATON_PRETOK_QWEN2, 0, 0}},
    {"f2llmv2", {BATON_PRETOK_QWEN2, 0, 0}},
    {"stablelm2", {BATON_PRETOK_QWEN2, 0, 0}},
    {"megrez", {BATON_PRETOK_QWEN2, 0, 0}},
    {"hunyuan", {BATON_PRETOK_QWEN2, 0, 0}},
    {"solar-open", {BATON_PRETOK_QWEN2, 0, 0}},
    {"gpt-2", {BATON_PRETOK_GPT2, 0, 0}},
    {"phi-2", {BATON_PRETOK_GPT2, 0, 0}},
    {"gigachat", {BATON_PRETOK_GPT2, 0, 0}},
    {"a.x-4.0", {BATON_PRETOK_GPT2, 0, 0}},
    {"mellum", {BATON_PRETOK_GPT2, 0, 0}},
    {"exaone4", {BATON_PRETOK_GPT2, 0, 0}},
    {"mpt", {BATON_PRETOK_GPT2, 0, 0}},
    {"olmo", {BATON_PRETOK_GPT2, 0, 0}},
    {"jais", {BATON_PRETOK_GPT2, 0, 0}},
    {"trillion", {BATON_PRETOK_GPT2, 0, 0}},
    {"granite-docling", {BATON_PRETOK_GPT2, 0, 0}},
    {"tekken", {BATON_PRETOK_TEKKEN, 1, 1}}, /* Mistral Nemo, Small 3 */
    {"smollm", {BATON_PRETOK_SMOLLM, 0, 0}},
    {"starcoder", {BATON_PRETOK_SMOLLM, 0, 0}},
    {"refact", {BATON_PRETOK_SMOLLM, 0, 0}},
    {"command-r", {BATON_PRETOK_SMOLLM, 0, 0}},
    {"codeshell", {BATON_PRETOK_SMOLLM, 0, 0}},
    {"exaone", {BATON_PRETOK_SMOLLM, 0, 0}},
    {"minerva-7b", {BATON_PRETOK_SMOLLM, 0, 0}},
    {"mellum2", {BATON_PRETOK_SMOLLM, 0, 0}},
};

int baton_pretok_lookup(const char *name, size_t len, struct baton_pretok_info *info)
{
    for (size_t i = 0; i < sizeof k_names / sizeof k_names[0]; i++)
        if (strlen(k_names[i].name) == len && memcmp(k_names[i].name, name, len) == 0) {
            *info = k_names[i].info;
            return 0;
        }
    return BATON_E_NOT_FOUND;
}

const char *baton_pretok_name(size_t i)
{
    return i < sizeof k_names / sizeof k_names[0] ? k_names[i].name : NULL;
}

int baton_pretok_create(int kind, struct baton_pretok **out)
{
    /* each kind's expressions, in order */
    static const char *const k_stages[][MAX_STAGES] = {
        [BATON_PRETOK_GPT2] = {k_gpt2},
        [BATON_PRETOK_LLAMA3] = {k_llama3},
        [BATON_PRETOK_QWEN2] = {k_qwen2},
        [BATON_PRETOK_TEKKEN] = {k_tekken},
        [BATON_PRETOK_SMOLLM] = {k_digit, k_gpt2},
        [BATON_PRETOK_DEFAULT] = {k_punct_runs, k_gpt2, k_number_runs, k_three_digits},
    };
    const char *const *patterns;
    size_t n = 0;
    int errcode;
    PCRE2_SIZE erroff;

    *out = NULL;
    if (kind <= 0 || (size_t)kind >= sizeof k_stages / sizeof k_stages[0])
        return BATON_E_INVAL;
    patterns = k_stages[kind];
    while (n < MAX_STAGES && patterns[n] != NULL)
        n++;
    struct baton_pretok *p = calloc(1, sizeof *p);
    if (p == NULL)
        return BATON_E_NOMEM;
    for (p->n = 0; p->n < n; p->n++) {
        p->code[p->n] = pcre2_compile((PCRE2_SPTR)patterns[p->n], PCRE2_ZERO_TERMINATED,
                                      PCRE2_UTF | PCRE2_UCP, &errcode, &erroff, NULL);
        if (p->code[p->n] == NULL) {
            baton_pretok_free(p);
            return errcode == PCRE2_ERROR_HEAPLIMIT ? BATON_E_NOMEM : BATON_E_UNSUPPORTED;
        }
    }
    *out = p;
    return 0;
}

void baton_pretok_free(struct baton_pretok *p)
{
    if (p == NULL)
        return;
    for (size_t i = 0; i < p->n; i++)
        pcre2_code_free(p->code[i]);
    free(p);
}

struct split_ctx {
    const struct baton_pretok *p;
    const char *text;
    pcre2_match_data *md;
    int (*word)(void *ctx, size_t off, size_t len);
    void *ctx;
};

/* A piece [off, off + len) of stage `stage`'s split: a word when it was the
 * last stage, else the next stage splits it. */
static int split_stage(const struct split_ctx *c, size_t stage, size_t off, size_t len);

static int emit(const struct split_ctx *c, size_t stage, size_t off, size_t len)
{
    if (stage + 1 == c->p->n)
        return c->word(c->ctx, off, len);
    return split_stage(c, stage + 1, off, len);
}

static int split_stage(const struct split_ctx *c, size_t stage, size_t off, size_t len)
{
    const char *text = c->text + off;
    size_t start = 0;
    int st;

    while (start < len) {
        /* The piece alone is the subject: its end is the text's end for
         * lookaheads, as llama.cpp splits each word of the stage before. */
        int rc = pcre2_match(c->p->code[stage], (PCRE2_SPTR)text, len, start,
                             PCRE2_NO_UTF_CHECK, c->md, NULL);
        if (rc == PCRE2_ERROR_NOMATCH)
            break;
        if (rc < 0)
            return rc == PCRE2_ERROR_NOMEMORY ? BATON_E_NOMEM : BATON_E_LIMIT;
        const PCRE2_SIZE *ov = pcre2_get_ovector_pointer(c->md);
        size_t m0 = ov[0], m1 = ov[1];
        if (m0 > start && (st = emit(c, stage, off + start, m0 - start)) != 0)
            return st;
        start = m0;
        if (m1 == m0) {
            /* An empty match (none of our patterns has one): the one
             * character there becomes a word, so the split advances. */
            if (m0 >= len)
                break;
            m1 = m0 + 1;
            while (m1 < len && ((uint8_t)text[m1] & 0xc0) == 0x80)
                m1++;
        }
        if ((st = emit(c, stage, off + m0, m1 - m0)) != 0)
            return st;
        start = m1;
    }
    if (start < len)
        return emit(c, stage, off + start, len - start);
    return 0;
}

int baton_pretok_split(const struct baton_pretok *p, const char *text, size_t len,
                       int (*word)(void *ctx, size_t off, size_t len), void *ctx)
{
    pcre2_match_data *md = NULL;
    int st;

    /* One match data serves every stage: the ovector is read before the
     * next match, and it is sized for the largest pattern. */
    for (size_t i = 0; i < p->n; i++) {
        pcre2_match_data *m = pcre2_match_data_create_from_pattern(p->code[i], NULL);
        if (m == NULL) {
            pcre2_match_data_free(md);
            return BATON_E_NOMEM;
        }
        if (md == NULL || pcre2_get_ovector_count(m) > pcre2_get_ovector_count(md)) {
            pcre2_match_data_free(md);
            md = m;
        } else {
            pcre2_match_data_free(m);
        }
    }
    struct split_ctx c = {p, text, md, word, ctx};
    st = len == 0 ? 0 : split_stage(&c, 0, 0, len);
    pcre2_match_data_free(md);
    return st;
}

size_t baton_utf8_sanitize(const char *text, size_t len, char *out)
{
    const uint8_t *s = (const uint8_t *)text;
    size_t o = 0;
    for (size_t i = 0; i < len;) {
        size_t cl = baton_gguf_utf8_len(s + i, len - i);
        if (cl == 0) {
            memcpy(out + o, "\xef\xbf\xbd", 3);
            o += 3;
            i++;
            continue;
        }
        memcpy(out + o, s + i, cl);
        o += cl;
        i += cl;
    }
    return o;
}

/* 1 if byte b stands for itself in GPT-2's mapping. */
static int byte_is_printable(unsigned b)
{
    return (b >= 0x21 && b <= 0x7e) || (b >= 0xa1 && b <= 0xac) || (b >= 0xae && b <= 0xff);
}

/* The 68 other bytes in increasing order: 0x00-0x20 (33), 0x7F-0xA0 (34),
 * 0xAD (1) go to U+0100.. U+0143. */
static uint32_t byte_to_cp(uint8_t b)
{
    if (byte_is_printable(b))
        return b;
    if (b <= 0x20)
        return 0x100u + b;
    if (b >= 0x7f && b <= 0xa0)
        return 0x100u + 33u + (b - 0x7fu);
    return 0x100u + 67u; /* 0xAD */
}

size_t baton_bpe_byte_encode(uint8_t b, char out[2])
{
    uint32_t cp = byte_to_cp(b);
    if (cp < 0x80) {
        out[0] = (char)cp;
        return 1;
    }
    out[0] = (char)(0xc0 | (cp >> 6));
    out[1] = (char)(0x80 | (cp & 0x3f));
    return 2;
}

int baton_bpe_byte_decode(uint32_t cp)
{
    if (cp < 0x100)
        return byte_is_printable(cp) ? (int)cp : -1;
    if (cp <= 0x120)
        return (int)(cp - 0x100);
    if (cp <= 0x142)
        return (int)(0x7f + (cp - 0x121));
    if (cp == 0x143)
        return 0xad;
    return -1;
}
