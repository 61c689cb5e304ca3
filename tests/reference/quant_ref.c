/* quant_ref: llama.cpp's quantizer (llama.h's llama_model_quantize, what
 * llama-quantize calls) on a GGUF, with its default parameters and no
 * importance matrix. Our own program, linked against the llama.cpp build
 * that make-fixtures.sh names.
 *
 *   quant_ref IN OUT FTYPE
 *
 * FTYPE is llama.h's llama_ftype number (25: IQ4_NL, 30: IQ4_XS, ...). One
 * thread, so that the output does not depend on the host. Exit 0 on success,
 * 1 when llama.cpp refuses, 2 on a usage error. */
#include <stdio.h>
#include <stdlib.h>

#include "llama.h"

static void quiet_log(enum ggml_log_level level, const char *text, void *user)
{
    (void)user;
    if (level == GGML_LOG_LEVEL_ERROR)
        fputs(text, stderr);
}

int main(int argc, char **argv)
{
    llama_model_quantize_params qp;
    char *end;
    long ftype;
    uint32_t rc;

    if (argc != 4) {
        fprintf(stderr, "usage: quant_ref IN OUT FTYPE\n");
        return 2;
    }
    ftype = strtol(argv[3], &end, 10);
    if (*argv[3] == '\0' || *end != '\0' || ftype <= 0 || ftype > 1000) {
        fprintf(stderr, "quant_ref: bad ftype %s\n", argv[3]);
        return 2;
    }
    llama_log_set(quiet_log, NULL);
    llama_backend_init();
    qp = llama_model_quantize_default_params();
    qp.nthread = 1;
    qp.ftype = (enum llama_ftype)ftype;
    rc = llama_model_quantize(argv[1], argv[2], &qp);
    llama_backend_free();
    if (rc != 0) {
        fprintf(stderr, "quant_ref: llama_model_quantize failed (%u)\n", rc);
        return 1;
    }
    return 0;
}
