/* Integer and decimal option values, shared by `baton` and `batond` (see cli.h). */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "core/types.h"

int baton_cli_check_u64(const char *s, uint64_t min, uint64_t max, uint64_t *out)
{
    const char *digits = s[0] == '-' ? s + 1 : s;
    uint64_t v = 0;
    int too_large = 0;
    size_t i;

    /* digits only: no sign other than a leading '-', no space, no "0x" */
    for (i = 0; digits[i] != '\0'; i++)
        if (digits[i] < '0' || digits[i] > '9')
            break;
    if (i == 0 || digits[i] != '\0')
        return BATON_CLI_NOT_INTEGER;
    for (i = 0; digits[i] != '\0'; i++) {
        const uint64_t d = (uint64_t)(digits[i] - '0');

        if (v > (UINT64_MAX - d) / 10) {
            too_large = 1;
            break;
        }
        v = v * 10 + d;
    }
    if (digits != s && (too_large || v != 0)) /* "-0" is 0 */
        return BATON_CLI_TOO_SMALL;
    if (too_large || v > max)
        return BATON_CLI_TOO_LARGE;
    if (v < min)
        return BATON_CLI_TOO_SMALL;
    *out = v;
    return 0;
}

const char *baton_cli_u64_why(int why, uint64_t min, uint64_t max, char *buf, size_t len)
{
    if (why == BATON_CLI_NOT_INTEGER)
        snprintf(buf, len, "is not an integer");
    else if (why == BATON_CLI_TOO_LARGE)
        snprintf(buf, len, "is too large (at most %" PRIu64 ")", max);
    else
        snprintf(buf, len, "is too small (at least %" PRIu64 ")", min);
    return buf;
}

int baton_cli_parse_u64(const char *prog, const char *opt, const char *s, uint64_t min,
                        uint64_t max, uint64_t *out)
{
    const int why = baton_cli_check_u64(s, min, max, out);
    char buf[BATON_CLI_WHY_LEN];

    if (why == 0)
        return 0;
    /* getopt hands "-n=3" to -n as "=3": say how a short option is written */
    if (why == BATON_CLI_NOT_INTEGER && s[0] == '=' && s[1] != '\0' && opt[0] == '-' &&
        opt[1] != '-' && opt[1] != '\0' && opt[2] == '\0') {
        fprintf(stderr, "%s: %s: '%s' is not an integer (write %s %s, without '=')\n", prog, opt,
                s, opt, s + 1);
        return -1;
    }
    fprintf(stderr, "%s: %s: '%s' %s\n", prog, opt, s,
            baton_cli_u64_why(why, min, max, buf, sizeof buf));
    return -1;
}

int baton_cli_parse_u32(const char *prog, const char *opt, const char *s, uint32_t min,
                        uint32_t max, uint32_t *out)
{
    uint64_t v;

    if (baton_cli_parse_u64(prog, opt, s, min, max, &v) != 0)
        return -1;
    *out = (uint32_t)v;
    return 0;
}

int baton_cli_parse_onoff(const char *prog, const char *opt, const char *s, int *out)
{
    if (strcmp(s, "on") == 0) {
        *out = 1;
    } else if (strcmp(s, "off") == 0) {
        *out = 0;
    } else {
        fprintf(stderr, "%s: %s: '%s' is not on or off\n", prog, opt, s);
        return -1;
    }
    return 0;
}

int baton_cli_parse_kv_type(const char *prog, const char *opt, const char *s, uint32_t *out)
{
    if (strcmp(s, "f32") == 0) {
        *out = BATON_TYPE_F32;
    } else if (strcmp(s, "f16") == 0) {
        *out = BATON_TYPE_F16;
    } else {
        fprintf(stderr, "%s: %s: '%s' is not f32 or f16\n", prog, opt, s);
        return -1;
    }
    return 0;
}

/* Whether s is a plain decimal number: an optional '-', digits with at most
 * one '.' (a digit on at least one side), then optionally 'e' or 'E', an
 * optional sign and digits. */
static int plain_decimal(const char *s)
{
    size_t i = s[0] == '-', digits = 0;

    while (s[i] >= '0' && s[i] <= '9') {
        i++;
        digits++;
    }
    if (s[i] == '.') {
        i++;
        while (s[i] >= '0' && s[i] <= '9') {
            i++;
            digits++;
        }
    }
    if (digits == 0)
        return 0;
    if (s[i] == 'e' || s[i] == 'E') {
        size_t exp_digits = 0;

        i++;
        if (s[i] == '+' || s[i] == '-')
            i++;
        while (s[i] >= '0' && s[i] <= '9') {
            i++;
            exp_digits++;
        }
        if (exp_digits == 0)
            return 0;
    }
    return s[i] == '\0';
}

int baton_cli_parse_float(const char *prog, const char *opt, const char *s, double lo, double hi,
                          int lo_open, float *out)
{
    const char open = lo_open ? '(' : '[';
    char *end = NULL;
    double v;
    float f;

    if (!plain_decimal(s)) {
        fprintf(stderr,
                "%s: %s: '%s' is not a decimal number (digits with an optional '.' and "
                "exponent, as 0.25 or 25e-2)\n",
                prog, opt, s);
        return -1;
    }
    errno = 0;
    v = strtod(s, &end); /* the C locale: '.' is the decimal point */
    f = (float)v;
    /* ERANGE: past DBL_MAX (a value below the smallest double is 0 or a
     * subnormal, and the range check below decides) */
    if ((errno == ERANGE && (v > 1.0 || v < -1.0)) || v < lo || v > hi || (lo_open && v <= lo)) {
        fprintf(stderr, "%s: %s: '%s' is not in %c%g, %g]\n", prog, opt, s, open, lo, hi);
        return -1;
    }
    /* the value the run uses is a float: one that rounds out of the range
     * (1e-50 to 0) is refused, not changed */
    if ((double)f < lo || (double)f > hi || (lo_open && (double)f <= lo)) {
        fprintf(stderr, "%s: %s: '%s' is not in %c%g, %g] as a 32-bit float (%g)\n", prog, opt,
                s, open, lo, hi, (double)f);
        return -1;
    }
    *out = f;
    return 0;
}
