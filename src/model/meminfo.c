/* MemAvailable of a /proc/meminfo text (see meminfo.h). */
#include "model/meminfo.h"

#include <string.h>

#include "baton/status.h"

int baton_meminfo_available(const char *text, size_t len, uint64_t *bytes)
{
    static const char key[] = "MemAvailable:";
    const size_t key_len = sizeof key - 1;
    size_t pos, end = 0, i, first_digit;
    uint64_t kib = 0;
    int rc = BATON_E_NOT_FOUND;

    /* the first line (lines end at LF) that begins with the key decides */
    for (pos = 0; pos < len; pos = end + 1) {
        for (end = pos; end < len && text[end] != '\n'; end++)
            ;
        if (end - pos >= key_len && memcmp(text + pos, key, key_len) == 0)
            break;
    }
    if (pos >= len)
        goto out;
    rc = BATON_E_FORMAT;
    for (i = pos + key_len; i < end && text[i] == ' '; i++)
        ;
    for (first_digit = i; i < end && text[i] >= '0' && text[i] <= '9'; i++) {
        if (kib > (UINT64_MAX / 1024 - (uint64_t)(text[i] - '0')) / 10) {
            rc = BATON_E_OVERFLOW;
            goto out;
        }
        kib = kib * 10 + (uint64_t)(text[i] - '0');
    }
    if (i == first_digit || end - i != 3 || memcmp(text + i, " kB", 3) != 0)
        goto out;
    *bytes = kib * 1024;
    rc = 0;
out:
    return rc;
}
