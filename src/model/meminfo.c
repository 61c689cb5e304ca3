/* MemAvailable of a /proc/meminfo text (see meminfo.h). */
#include "model/meminfo.h"

#include <string.h>

#include "baton/status.h"

int baton_meminfo_available(const char *text, size_t len, uint64_t *bytes)
{
    static const char key[] = "MemAvailable:";
    const size_t key_len = sizeof key - 1;
    size_t pos = 0;

    while (pos < len) {
        size_t end = pos;

        while (end < len && text[end] != '\n')
            end++;
        if (end - pos >= key_len && memcmp(text + pos, key, key_len) == 0) {
            uint64_t kib = 0;
            size_t i = pos + key_len, n_digits = 0;

            while (i < end && text[i] == ' ')
                i++;
            for (; i < end && text[i] >= '0' && text[i] <= '9'; i++, n_digits++) {
                if (kib > (UINT64_MAX / 1024 - (uint64_t)(text[i] - '0')) / 10)
                    return BATON_E_OVERFLOW;
                kib = kib * 10 + (uint64_t)(text[i] - '0');
            }
            if (n_digits == 0 || end - i != 3 || memcmp(text + i, " kB", 3) != 0)
                return BATON_E_FORMAT;
            *bytes = kib * 1024;
            return 0;
        }
        pos = end + 1;
    }
    return BATON_E_NOT_FOUND;
}
