/* Pre-tokenizers and GPT-2's byte-to-unicode mapping (see tokenizer_pre.h). */
#define PCRE2_CODE_UNIT_WIDTH 8
#include "model/tokenizer_pre.h"

#include <pcre2.h>
#include <stdlib.h>
#include <string.h>

#include "baton/status.h"
#include "model/gguf.h"

struct baton_pretok {
    pcre2_code *code;
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

int baton_pretok_kind(const char *name, size_t len)
{
    static const struct {
        const char *name;
        int kind;
    } k_names[] = {
        {"gpt-2", BATON_PRETOK_GPT2},
        {"llama-bpe", BATON_PRETOK_LLAMA3},
        {"qwen2", BATON_PRETOK_QWEN2},
    };
    for (size_t i = 0; i < sizeof k_names / sizeof k_names[0]; i++)
        if (strlen(k_names[i].name) == len && memcmp(k_names[i].name, name, len) == 0)
            return k_names[i].kind;
    return 0;
}

int baton_pretok_create(int kind, struct baton_pretok **out)
{
    const char *pattern;
    int errcode;
    PCRE2_SIZE erroff;

    *out = NULL;
    switch (kind) {
    case BATON_PRETOK_GPT2:
        pattern = k_gpt2;
        break;
    case BATON_PRETOK_LLAMA3:
        pattern = k_llama3;
        break;
    case BATON_PRETOK_QWEN2:
        pattern = k_qwen2;
        break;
    default:
        return BATON_E_INVAL;
    }
    struct baton_pretok *p = calloc(1, sizeof *p);
    if (p == NULL)
        return BATON_E_NOMEM;
    p->code = pcre2_compile((PCRE2_SPTR)pattern, PCRE2_ZERO_TERMINATED, PCRE2_UTF | PCRE2_UCP,
                            &errcode, &erroff, NULL);
    if (p->code == NULL) {
        free(p);
        return errcode == PCRE2_ERROR_HEAPLIMIT ? BATON_E_NOMEM : BATON_E_UNSUPPORTED;
    }
    *out = p;
    return 0;
}

void baton_pretok_free(struct baton_pretok *p)
{
    if (p == NULL)
        return;
    pcre2_code_free(p->code);
    free(p);
}

int baton_pretok_split(const struct baton_pretok *p, const char *text, size_t len,
                       int (*word)(void *ctx, size_t off, size_t len), void *ctx)
{
    pcre2_match_data *md = pcre2_match_data_create_from_pattern(p->code, NULL);
    size_t start = 0;
    int st = 0;

    if (md == NULL)
        return BATON_E_NOMEM;
    while (start < len) {
        int rc = pcre2_match(p->code, (PCRE2_SPTR)text, len, start, PCRE2_NO_UTF_CHECK, md, NULL);
        if (rc == PCRE2_ERROR_NOMATCH)
            break;
        if (rc < 0) {
            st = rc == PCRE2_ERROR_NOMEMORY ? BATON_E_NOMEM : BATON_E_LIMIT;
            goto out;
        }
        const PCRE2_SIZE *ov = pcre2_get_ovector_pointer(md);
        size_t m0 = ov[0], m1 = ov[1];
        if (m0 > start && (st = word(ctx, start, m0 - start)) != 0)
            goto out;
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
        if ((st = word(ctx, m0, m1 - m0)) != 0)
            goto out;
        start = m1;
    }
    if (start < len)
        st = word(ctx, start, len - start);
out:
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
