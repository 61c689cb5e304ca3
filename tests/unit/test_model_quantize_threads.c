/* baton_quantize_file's row split (genmodel.c convert_tensor) when a
 * thread cannot be started: the rows of that thread's part must still be
 * converted. This program interposes sysconf (4 online CPUs, so a tensor
 * is split in 4 parts) and pthread_create (every second call fails with
 * EAGAIN, after a pause that lets the thread started before it take its
 * rows): the output must be byte for byte that of an unhindered run. Before
 * the fix the last started thread's range was widened while it ran, and
 * the rows of the parts past it were left unconverted (exit 0). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* RTLD_NEXT */
#endif
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "core/types.h"
#include "model/genmodel.h"
#include "model/quant_preset.h"

static int hinder;          /* 1: 4 CPUs, every second pthread_create fails */
static unsigned n_calls, n_failed, n_started;

long sysconf(int name)
{
    long (*real)(int) = (long (*)(int))dlsym(RTLD_NEXT, "sysconf");

    if (hinder && name == _SC_NPROCESSORS_ONLN)
        return 4;
    return real(name);
}

int pthread_create(pthread_t *thread, const pthread_attr_t *attr, void *(*fn)(void *), void *arg)
{
    int (*real)(pthread_t *, const pthread_attr_t *, void *(*)(void *), void *) =
        (int (*)(pthread_t *, const pthread_attr_t *, void *(*)(void *), void *))dlsym(
            RTLD_NEXT, "pthread_create");

    if (hinder && ++n_calls % 2 == 0) {
        const struct timespec pause = {0, 20 * 1000 * 1000};

        nanosleep(&pause, NULL);
        n_failed++;
        return EAGAIN;
    }
    if (hinder)
        n_started++;
    return real(thread, attr, fn, arg);
}

static unsigned char *read_all(const char *path, long *n)
{
    FILE *f = fopen(path, "rb");
    unsigned char *buf;

    assert_non_null(f);
    assert_int_equal(fseek(f, 0, SEEK_END), 0);
    *n = ftell(f);
    assert_true(*n > 0);
    rewind(f);
    buf = malloc((size_t)*n);
    assert_non_null(buf);
    assert_int_equal(fread(buf, 1, (size_t)*n, f), (size_t)*n);
    fclose(f);
    return buf;
}

static void thread_start_fails(void **state)
{
    char in[96], ref[96], out[96], err[512] = "";
    struct baton_gen_model_config cfg = {0};
    const int presets[2] = {BATON_PRESET_IQ4_XS, BATON_PRESET_Q4_K_M};
    unsigned char *a, *b;
    long na, nb;
    int p;

    (void)state;
    snprintf(in, sizeof in, "/tmp/baton_qt_in_%ld.gguf", (long)getpid());
    snprintf(ref, sizeof ref, "/tmp/baton_qt_ref_%ld.gguf", (long)getpid());
    snprintf(out, sizeof out, "/tmp/baton_qt_out_%ld.gguf", (long)getpid());
    /* token_embd and output 256 x 2048 and ffn 256 x 1024: 2^16 elements
     * and 8 rows or more for each of 4 parts */
    cfg.n_layer = 1;
    cfg.n_embd = 256;
    cfg.n_ff = 1024;
    cfg.n_head = 4;
    cfg.n_head_kv = 4;
    cfg.n_vocab = 2048;
    cfg.n_ctx = 256;
    cfg.type = BATON_TYPE_F32;
    cfg.seed = 3;
    cfg.out_path = in;
    assert_int_equal(baton_gen_model(&cfg, err, sizeof err), 0);
    for (p = 0; p < 2; p++) {
        hinder = 0;
        assert_int_equal(baton_quantize_file(in, ref, 0, presets[p], err, sizeof err, NULL, NULL),
                         0);
        hinder = 1;
        n_calls = n_failed = n_started = 0;
        assert_int_equal(baton_quantize_file(in, out, 0, presets[p], err, sizeof err, NULL, NULL),
                         0);
        hinder = 0;
        /* the case: a thread started, then one could not be */
        assert_true(n_started > 0);
        assert_true(n_failed > 0);
        a = read_all(ref, &na);
        b = read_all(out, &nb);
        assert_int_equal(na, nb);
        assert_memory_equal(a, b, (size_t)na);
        free(a);
        free(b);
    }
    unlink(in);
    unlink(ref);
    unlink(out);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(thread_start_fails),
    };

    /* ASan's runtime intercepts pthread_create itself: a thread started
     * past it would be unknown to it */
    if (getenv("BATON_ASAN") != NULL) {
        printf("SKIP: interposes pthread_create (not under ASan)\n");
        return 77;
    }
    return cmocka_run_group_tests(tests, NULL, NULL);
}
