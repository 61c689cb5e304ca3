/* `baton inspect FILE [--json | --check]`: prints a GGUF file's header,
 * metadata and tensor table, as read (and validated) by src/model/gguf.h;
 * with --check, reads every tensor's values instead and reports those that
 * hold NaN or infinities (a damaged or badly converted file, which would
 * otherwise give NaN logits and a silent token 0). */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "baton/status.h"
#include "cli/cli.h"
#include "compute/cpu/quant.h"
#include "model/gguf.h"

#define INSPECT_ARRAY_HEAD 8u        /* array elements shown */
#define INSPECT_TEXT_STRING_MAX 160u /* bytes of a string shown in text mode */
#define INSPECT_CHECK_CHUNK 4096u    /* --check: elements dequantized at a time (256 | it) */

static void usage(FILE *f)
{
    fputs("usage: baton inspect FILE [--json | --check]\n"
          "\n"
          "Reads a GGUF model file (v2/v3), checks every field, and prints its header,\n"
          "metadata (key = value; arrays as type[count] with the first 8 elements) and\n"
          "tensor table (name, type, shape, offset in the data section, bytes).\n"
          "\n"
          "  --json     one JSON object instead of text\n"
          "  --check    instead, read every value of every tensor (dequantized) and\n"
          "             name each tensor that holds NaN or infinite values\n"
          "  -h, --help this help\n"
          "\n"
          "Exit status: 0 ok (with --check: every value finite), 1 the file cannot be\n"
          "read or is not valid GGUF (with --check: or a tensor holds NaN or infinite\n"
          "values), 2 usage.\n",
          f);
}

/* cli.h; text mode shows at most INSPECT_TEXT_STRING_MAX bytes. */
void baton_cli_put_string(FILE *f, const char *ptr, size_t len, int json)
{
    const unsigned char *s = (const unsigned char *)ptr;
    size_t shown = (!json && len > INSPECT_TEXT_STRING_MAX) ? INSPECT_TEXT_STRING_MAX : len;
    fputc('"', f);
    for (size_t i = 0; i < shown;) {
        unsigned char c = s[i];
        if (c == '"' || c == '\\') {
            fprintf(f, "\\%c", c);
            i++;
        } else if (c == '\n') {
            fputs("\\n", f);
            i++;
        } else if (c == '\t') {
            fputs("\\t", f);
            i++;
        } else if (c < 0x20 || c == 0x7f) {
            fprintf(f, json ? "\\u%04x" : "\\x%02x", c);
            i++;
        } else if (c < 0x80) {
            fputc(c, f);
            i++;
        } else {
            size_t l = baton_gguf_utf8_len(s + i, len - i);
            if (l == 2 && l <= shown - i && c == 0xc2 && s[i + 1] < 0xa0) {
                /* a C1 control (U+0080..U+009F; U+009B is CSI, which some
                 * terminals act on), escaped like the C0 ones */
                if (json)
                    fprintf(f, "\\u%04x", s[i + 1]);
                else
                    fprintf(f, "\\x%02x\\x%02x", c, s[i + 1]);
                i += 2;
            } else if (l == 0 || l > shown - i) {
                if (json)
                    fputs("\\ufffd", f);
                else
                    fprintf(f, "\\x%02x", c);
                i++;
            } else {
                fwrite(s + i, 1, l, f);
                i += l;
            }
        }
    }
    fputc('"', f);
    if (shown < len)
        fprintf(f, "...(%zu bytes)", len);
}

/* A key or tensor name for text output, through the escaping of every
 * message that quotes the file (gguf.h): a file cannot send control
 * sequences, C1 ones included, to the terminal. cap holds the longest key
 * (1024 bytes) escaped whole. */
#define TEXT_NAME_CAP (4 * BATON_GGUF_MAX_KEY_BYTES + 1)
static const char *text_name(char *dst, const char *s)
{
    return baton_gguf_escape(dst, TEXT_NAME_CAP, s, strlen(s));
}

static void put_scalar(FILE *f, const struct baton_gguf_scalar *v, int json)
{
    switch (v->type) {
    case BATON_GGUF_U8:
    case BATON_GGUF_U16:
    case BATON_GGUF_U32:
    case BATON_GGUF_U64:
        fprintf(f, "%" PRIu64, v->v.u);
        break;
    case BATON_GGUF_I8:
    case BATON_GGUF_I16:
    case BATON_GGUF_I32:
    case BATON_GGUF_I64:
        fprintf(f, "%" PRId64, v->v.i);
        break;
    case BATON_GGUF_BOOL:
        fputs(v->v.u ? "true" : "false", f);
        break;
    case BATON_GGUF_F32:
    case BATON_GGUF_F64:
        if (json && !isfinite(v->v.f))
            fputs("null", f);
        else
            fprintf(f, v->type == BATON_GGUF_F32 ? "%.9g" : "%.17g", v->v.f);
        break;
    case BATON_GGUF_STRING:
        baton_cli_put_string(f, v->v.str.ptr, v->v.str.len, json);
        break;
    default:
        fputs(json ? "null" : "?", f);
        break;
    }
}

static void put_array_head(FILE *f, const struct baton_gguf_kv *kv, uint64_t count, int json)
{
    uint64_t shown = count < INSPECT_ARRAY_HEAD ? count : INSPECT_ARRAY_HEAD;
    fputc('[', f);
    for (uint64_t i = 0; i < shown; i++) {
        struct baton_gguf_scalar v;
        if (i > 0)
            fputs(", ", f);
        if (baton_gguf_arr_get(kv, i, &v) == 0)
            put_scalar(f, &v, json);
    }
    if (!json && shown < count)
        fputs(", ...", f);
    fputc(']', f);
}

static void put_kv(FILE *f, const struct baton_gguf_kv *kv, int json)
{
    uint32_t elem_type;
    uint64_t count;
    struct baton_gguf_scalar v;
    const char *key = baton_gguf_kv_key(kv);
    if (json) {
        baton_cli_put_string(f, key, strlen(key), 1);
        fputs(": ", f);
        if (baton_gguf_kv_array(kv, &elem_type, &count) == 0) {
            fprintf(f,
                    "{\"type\": \"array\", \"elem_type\": \"%s\", \"count\": %" PRIu64
                    ", \"head\": ",
                    baton_gguf_type_name(elem_type), count);
            put_array_head(f, kv, count, 1);
            fputc('}', f);
        } else if (baton_gguf_kv_scalar(kv, &v) == 0) {
            fprintf(f, "{\"type\": \"%s\", \"value\": ", baton_gguf_type_name(v.type));
            put_scalar(f, &v, 1);
            fputc('}', f);
        }
        return;
    }
    char name[TEXT_NAME_CAP];
    fprintf(f, "  %s = ", text_name(name, key));
    if (baton_gguf_kv_array(kv, &elem_type, &count) == 0) {
        fprintf(f, "%s[%" PRIu64 "] ", baton_gguf_type_name(elem_type), count);
        put_array_head(f, kv, count, 0);
    } else if (baton_gguf_kv_scalar(kv, &v) == 0) {
        put_scalar(f, &v, 0);
        if (v.type != BATON_GGUF_STRING && v.type != BATON_GGUF_BOOL)
            fprintf(f, " (%s)", baton_gguf_type_name(v.type));
    }
    fputc('\n', f);
}

static void put_shape(FILE *f, const struct baton_gguf_tensor *t, int json)
{
    char buf[128];
    size_t n = 0;
    unsigned dims = t->n_dims ? t->n_dims : 1;
    for (unsigned d = 0; d < dims && n < sizeof buf; d++)
        n += (size_t)snprintf(buf + n, sizeof buf - n, "%s%" PRIu64, d ? (json ? ", " : " x ") : "",
                              t->ne[d]);
    if (json)
        fprintf(f, "[%s]", buf);
    else
        fprintf(f, "%-20s", buf);
}

static void print_text(FILE *f, const char *path, const struct baton_gguf *g)
{
    uint64_t total_bytes = 0, total_elems = 0;
    fprintf(f, "%s: GGUF v%u, %" PRIu64 " bytes, alignment %u, data at offset %" PRIu64 "\n", path,
            baton_gguf_version(g), baton_gguf_file_size(g), baton_gguf_alignment(g),
            baton_gguf_data_offset(g));
    fprintf(f, "metadata (%" PRIu64 " keys):\n", baton_gguf_n_kv(g));
    for (uint64_t i = 0; i < baton_gguf_n_kv(g); i++)
        put_kv(f, baton_gguf_kv_at(g, i), 0);
    fprintf(f, "tensors (%" PRIu64 "):\n", baton_gguf_n_tensors(g));
    fprintf(f, "  %5s  %-32s %-6s %-20s %12s %12s\n", "#", "name", "type", "shape", "offset",
            "bytes");
    for (uint64_t i = 0; i < baton_gguf_n_tensors(g); i++) {
        struct baton_gguf_tensor t;
        if (baton_gguf_tensor_at(g, i, &t) != 0)
            continue;
        char name[TEXT_NAME_CAP];
        fprintf(f, "  %5" PRIu64 "  %-32s %-6s ", i, text_name(name, t.name),
                baton_type_name(t.type));
        put_shape(f, &t, 0);
        fprintf(f, " %12" PRIu64 " %12" PRIu64 "\n", t.offset, t.nbytes);
        uint64_t elems = t.ne[0] * t.ne[1] * t.ne[2] * t.ne[3]; /* checked at open */
        total_bytes += t.nbytes;
        total_elems += elems;
    }
    fprintf(f, "total: %" PRIu64 " tensor bytes, %" PRIu64 " elements\n", total_bytes, total_elems);
}

static void print_json(FILE *f, const char *path, const struct baton_gguf *g)
{
    fputs("{\"file\": ", f);
    baton_cli_put_string(f, path, strlen(path), 1);
    fprintf(f,
            ", \"version\": %u, \"size\": %" PRIu64 ", \"alignment\": %u, \"data_offset\": %" PRIu64
            ",\n \"metadata\": {",
            baton_gguf_version(g), baton_gguf_file_size(g), baton_gguf_alignment(g),
            baton_gguf_data_offset(g));
    for (uint64_t i = 0; i < baton_gguf_n_kv(g); i++) {
        fputs(i ? ",\n  " : "\n  ", f);
        put_kv(f, baton_gguf_kv_at(g, i), 1);
    }
    fputs("},\n \"tensors\": [", f);
    for (uint64_t i = 0; i < baton_gguf_n_tensors(g); i++) {
        struct baton_gguf_tensor t;
        if (baton_gguf_tensor_at(g, i, &t) != 0)
            continue;
        fputs(i ? ",\n  " : "\n  ", f);
        fputs("{\"name\": ", f);
        baton_cli_put_string(f, t.name, strlen(t.name), 1);
        fprintf(f, ", \"type\": \"%s\", \"shape\": ", baton_type_name(t.type));
        put_shape(f, &t, 1);
        fprintf(f, ", \"offset\": %" PRIu64 ", \"bytes\": %" PRIu64 "}", t.offset, t.nbytes);
    }
    fputs("]}\n", f);
}

/* --check: every value of every tensor, INSPECT_CHECK_CHUNK elements at a
 * time (dequantized for the quantized types, baton_dequantize_row): a fixed
 * buffer, whatever a tensor's ne[0] says (a file may declare ne[0] = 2^62
 * with another dimension 0). One line per tensor with a NaN or infinity,
 * then a summary. Returns 0 (all finite) or 1 (some are not). Tensors of a
 * type without a float reading (I32) are counted as skipped. */
static int check_values(const char *path, const struct baton_gguf *g)
{
    static float chunk[INSPECT_CHECK_CHUNK];
    uint64_t n_bad = 0, n_skipped = 0, n_values = 0;

    for (uint64_t i = 0; i < baton_gguf_n_tensors(g); i++) {
        struct baton_gguf_tensor t;
        uint64_t k, rows, rb, bad = 0, first = 0;
        int skipped = 0;

        if (baton_gguf_tensor_at(g, i, &t) != 0)
            continue;
        k = t.n_dims ? t.ne[0] : 1;
        if (k == 0)
            continue; /* no values: not "skipped: no float reading" */
        rb = baton_row_bytes(t.type, k);
        if (rb == 0) {
            n_skipped++;
            continue;
        }
        rows = t.nbytes / rb;
        for (uint64_t r = 0; r < rows && !skipped; r++) {
            const uint8_t *src = (const uint8_t *)t.data + r * rb;

            /* k is a multiple of the type's block and the chunk a multiple
             * of every block (256), so each piece starts on a block */
            for (uint64_t done = 0; done < k;) {
                uint64_t n = k - done < INSPECT_CHECK_CHUNK ? k - done : INSPECT_CHECK_CHUNK;

                if (baton_dequantize_row(t.type, src + baton_row_bytes(t.type, done), chunk, n) !=
                    0) {
                    skipped = 1;
                    break;
                }
                for (uint64_t e = 0; e < n; e++)
                    if (!isfinite(chunk[e]) && bad++ == 0)
                        first = r * k + done + e;
                done += n;
            }
        }
        if (skipped) {
            n_skipped++;
            continue;
        }
        n_values += rows * k;
        if (bad) {
            n_bad++;
            printf("%s: tensor ", path);
            baton_cli_put_string(stdout, t.name, strlen(t.name), 0);
            printf(" (%s): %" PRIu64 " of %" PRIu64 " values are NaN or infinite (the first "
                   "at element %" PRIu64 ")\n",
                   baton_type_name(t.type), bad, rows * k, first);
        }
    }
    printf("%s: %" PRIu64 " tensors, %" PRIu64 " values read%s: ", path,
           baton_gguf_n_tensors(g), n_values, n_skipped ? " (some skipped: no float reading)" : "");
    if (n_bad)
        printf("%" PRIu64 " tensor%s NaN or infinite values\n", n_bad,
               n_bad == 1 ? " holds" : "s hold");
    else
        printf("every value is finite\n");
    return n_bad != 0;
}

int baton_cmd_inspect(int argc, char **argv)
{
    enum { O_JSON = 256, O_CHECK };
    static const struct option opts[] = {{"json", no_argument, 0, O_JSON},
                                         {"check", no_argument, 0, O_CHECK},
                                         {"help", no_argument, 0, 'h'},
                                         {0, 0, 0, 0}};
    const char *path = NULL;
    int json = 0, check = 0, c;

    optind = 1;
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        switch (c) {
        case O_JSON: json = 1; break;
        case O_CHECK: check = 1; break;
        case 'h': usage(stdout); return 0;
        default: /* getopt said which option */
            fputs("(see `baton inspect --help`)\n", stderr);
            return 2;
        }
    }
    if (optind < argc)
        path = argv[optind];
    if (optind + 1 < argc) {
        fprintf(stderr, "baton inspect: more than one FILE ('%s')\n(see `baton inspect --help`)\n",
                argv[optind + 1]);
        return 2;
    }
    if (path == NULL) {
        fputs("baton inspect: missing FILE\n(see `baton inspect --help`)\n", stderr);
        return 2;
    }
    if (json && check) {
        fputs("baton inspect: --json and --check do not go together\n", stderr);
        return 2;
    }

    struct baton_gguf *g = NULL;
    char err[512];
    int st = baton_gguf_open(path, &g, err, sizeof err);
    if (st != 0) {
        fprintf(stderr, "baton inspect: %s (%s)\n", err[0] ? err : path, baton_status_name(st));
        return 1;
    }
    int bad = 0;
    if (check)
        bad = check_values(path, g);
    else if (json)
        print_json(stdout, path, g);
    else
        print_text(stdout, path, g);
    baton_gguf_close(g);
    errno = 0;
    if (fflush(stdout) != 0 || ferror(stdout)) {
        fprintf(stderr, "baton inspect: standard output: cannot write: %s\n",
                errno ? strerror(errno) : "write error");
        return 1;
    }
    return bad;
}
