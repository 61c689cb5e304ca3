/* Integer option values, shared by `baton` and `batond` (see cli.h). */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"

int baton_cli_parse_u64(const char *prog, const char *opt, const char *s, uint64_t min,
                        uint64_t max, uint64_t *out)
{
    const char *digits = s[0] == '-' ? s + 1 : s;
    uint64_t v = 0;
    int too_large = 0;
    size_t i;

    /* digits only: no sign other than a leading '-', no space, no "0x" */
    for (i = 0; digits[i] != '\0'; i++)
        if (digits[i] < '0' || digits[i] > '9')
            break;
    if (i == 0 || digits[i] != '\0') {
        fprintf(stderr, "%s: %s: '%s' is not an integer\n", prog, opt, s);
        return -1;
    }
    for (i = 0; digits[i] != '\0'; i++) {
        const uint64_t d = (uint64_t)(digits[i] - '0');

        if (v > (UINT64_MAX - d) / 10) {
            too_large = 1;
            break;
        }
        v = v * 10 + d;
    }
    if (digits != s && (too_large || v != 0)) { /* "-0" is 0 */
        fprintf(stderr, "%s: %s: '%s' is too small (at least %" PRIu64 ")\n", prog, opt, s, min);
        return -1;
    }
    if (too_large || v > max) {
        fprintf(stderr, "%s: %s: '%s' is too large (at most %" PRIu64 ")\n", prog, opt, s, max);
        return -1;
    }
    if (v < min) {
        fprintf(stderr, "%s: %s: '%s' is too small (at least %" PRIu64 ")\n", prog, opt, s, min);
        return -1;
    }
    *out = v;
    return 0;
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
