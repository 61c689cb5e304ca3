/* POISON / UNPOISON: AddressSanitizer's manual poisoning of a memory range
 * in sanitizer builds (gcc's __SANITIZE_ADDRESS__, clang's
 * __has_feature(address_sanitizer)); elsewhere both do nothing. Used for
 * the mmap'ed server buffers (handles.c) and session scratch arenas
 * (session.c), which ASan does not see otherwise (issue 16, "Overruns
 * visible"). ASan's shadow is plain memory, so this makes no system call. */
#ifndef BATON_SERVER_ASAN_POISON_H
#define BATON_SERVER_ASAN_POISON_H

#include <stddef.h>

#if defined(__SANITIZE_ADDRESS__)
#define BATON_SERVER_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define BATON_SERVER_ASAN 1
#endif
#endif
#ifdef BATON_SERVER_ASAN
#include <sanitizer/asan_interface.h>
#define POISON(p, n) ASAN_POISON_MEMORY_REGION((p), (size_t)(n))
#define UNPOISON(p, n) ASAN_UNPOISON_MEMORY_REGION((p), (size_t)(n))
#else
#define POISON(p, n) ((void)(p), (void)(n))
#define UNPOISON(p, n) ((void)(p), (void)(n))
#endif

#endif
