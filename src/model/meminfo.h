/* The MemAvailable figure of a /proc/meminfo text. A file of its own, with
 * no dependency beyond the status codes, so the fuzz target meminfo
 * (fuzz/fuzz_meminfo.c) compiles it alone. */
#ifndef BATON_MODEL_MEMINFO_H
#define BATON_MODEL_MEMINFO_H

#include <stddef.h>
#include <stdint.h>

/* MemAvailable of a /proc/meminfo text (text[0..len), not necessarily
 * NUL-terminated; proc(5): a line "MemAvailable:" then spaces, a decimal
 * count and " kB"), in bytes. Returns 0 with *bytes set, BATON_E_NOT_FOUND
 * when no such line is there (kernels before 3.14), BATON_E_FORMAT when the
 * line is malformed, BATON_E_OVERFLOW when the bytes do not fit in 64 bits;
 * *bytes is unchanged on error. baton_gen_model compares its model with
 * this figure, and with the machine's RAM where it cannot be read.
 *
 * Precisely: lines end at LF (the last one may lack it; a CR is an ordinary
 * byte, so a CRLF line is malformed). The first line that begins with the
 * 13 bytes "MemAvailable:" decides, even when it is malformed and a later
 * one is not; lines after it are not read, and the name anywhere else in a
 * line (after a space, as part of "XMemAvailable:") is no match. The line
 * is well formed when the rest of it is zero or more ' ' (not tabs), one or
 * more digits 0-9 (leading zeros allowed), then exactly " kB". A count of
 * 2^54 kB or more (2^64 bytes or more) is BATON_E_OVERFLOW, decided on the
 * digits before what follows them is checked: "MemAvailable:
 * 99999999999999999999 MB" is BATON_E_OVERFLOW, not BATON_E_FORMAT. */
int baton_meminfo_available(const char *text, size_t len, uint64_t *bytes);

#endif
