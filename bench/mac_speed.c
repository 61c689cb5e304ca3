/* Frame MAC throughput: the candidates for per-frame integrity on a 64 MiB
 * payload fed in 1 MiB updates (as the server receives SET_TENSOR data),
 * plus the encrypt mode and a memcpy of the same bytes for scale.
 *
 * Build and run (not part of the test suite; speed is measured, never
 * asserted):
 *   cmake --build build --target baton_auth
 *   cc -O2 -std=c11 -D_GNU_SOURCE -Iinclude -Isrc bench/mac_speed.c \
 *      build/libbaton_auth.a $(pkg-config --libs libsodium libcrypto) -o build/mac_speed
 *   build/mac_speed [reps]
 *
 * Arms run in a rotating order within one run; each line gives the median
 * and the min..max over the repetitions in MB/s (10^6 bytes per second).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "auth/auth.h"

#define TOTAL (64u << 20)
#define CHUNK (1u << 20)
#define MAX_REPS 31

static uint8_t *buf, *dst;
static struct baton_frame_key fkey;
static uint8_t key32[32], key64[64];
static volatile uint8_t sink;

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void arm_memcpy(void)
{
    for (size_t off = 0; off < TOTAL; off += CHUNK)
        memcpy(dst + off, buf + off, CHUNK);
    sink ^= dst[TOTAL - 1];
}

static void arm_frame_mac(void)
{
    struct baton_mac m;
    uint8_t tag[16];
    baton_mac_begin(&m, &fkey, 1);
    baton_mac_update(&m, buf, 24); /* the header */
    for (size_t off = 0; off < TOTAL; off += CHUNK)
        baton_mac_update(&m, buf + off, CHUNK);
    baton_mac_final_tag(&m, tag);
    sink ^= tag[0];
}

/* what the frame MAC ran on before it moved to libcrypto: libsodium's
 * Poly1305 over the same bytes */
static void arm_sodium_poly1305(void)
{
    crypto_onetimeauth_poly1305_state st;
    uint8_t tag[16];
    crypto_onetimeauth_poly1305_init(&st, key32);
    crypto_onetimeauth_poly1305_update(&st, buf, 24);
    for (size_t off = 0; off < TOTAL; off += CHUNK)
        crypto_onetimeauth_poly1305_update(&st, buf + off, CHUNK);
    crypto_onetimeauth_poly1305_final(&st, tag);
    sink ^= tag[0];
}

static void arm_hmac_sha512(void)
{
    crypto_auth_hmacsha512_state st;
    uint8_t tag[64];
    crypto_auth_hmacsha512_init(&st, key32, sizeof key32);
    for (size_t off = 0; off < TOTAL; off += CHUNK)
        crypto_auth_hmacsha512_update(&st, buf + off, CHUNK);
    crypto_auth_hmacsha512_final(&st, tag);
    sink ^= tag[0];
}

static void arm_hmac_sha256(void)
{
    crypto_auth_hmacsha256_state st;
    uint8_t tag[32];
    crypto_auth_hmacsha256_init(&st, key32, sizeof key32);
    for (size_t off = 0; off < TOTAL; off += CHUNK)
        crypto_auth_hmacsha256_update(&st, buf + off, CHUNK);
    crypto_auth_hmacsha256_final(&st, tag);
    sink ^= tag[0];
}

static void arm_blake2b(void)
{
    crypto_generichash_state st;
    uint8_t tag[32];
    crypto_generichash_init(&st, key64, sizeof key64, sizeof tag);
    for (size_t off = 0; off < TOTAL; off += CHUNK)
        crypto_generichash_update(&st, buf + off, CHUNK);
    crypto_generichash_final(&st, tag, sizeof tag);
    sink ^= tag[0];
}

/* Encrypt mode as the sender would run it: ciphertext into a scratch
 * buffer (here dst), never over the source. */
static void arm_aead_encrypt(void)
{
    struct baton_mac m;
    uint8_t tag[16];
    baton_aead_begin(&m, &fkey, 2, buf, 24);
    for (size_t off = 0; off < TOTAL; off += CHUNK)
        baton_aead_encrypt(&m, dst + off, buf + off, CHUNK);
    baton_mac_final_tag(&m, tag);
    sink ^= tag[0];
}

/* Encrypt mode as the receiver would run it: in place in the destination.
 * The tag does not match (it is a timing run), so this measures the full
 * work of a verify. */
static void arm_aead_decrypt(void)
{
    struct baton_mac m;
    uint8_t tag[16] = {0};
    baton_aead_begin(&m, &fkey, 3, buf, 24);
    for (size_t off = 0; off < TOTAL; off += CHUNK)
        baton_aead_decrypt(&m, dst + off, dst + off, CHUNK);
    sink ^= (uint8_t)baton_mac_final_verify(&m, tag);
}

/* libsodium's one-shot AEAD over the whole 64 MiB, for comparison. */
static void arm_sodium_aead(void)
{
    uint8_t nonce[12] = {0}, tag[16];
    unsigned long long tlen;
    crypto_aead_chacha20poly1305_ietf_encrypt_detached(dst, tag, &tlen, buf, TOTAL, buf, 24,
                                                       NULL, nonce, key32);
    sink ^= tag[0];
}

struct arm {
    const char *name;
    void (*fn)(void);
    double mbps[MAX_REPS];
};

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
    struct arm arms[] = {
        {"memcpy (reference)", arm_memcpy, {0}},
        {"frame MAC: ChaCha20-Poly1305, MAC mode", arm_frame_mac, {0}},
        {"libsodium Poly1305 alone (frame MAC before)", arm_sodium_poly1305, {0}},
        {"HMAC-SHA-512", arm_hmac_sha512, {0}},
        {"HMAC-SHA-256", arm_hmac_sha256, {0}},
        {"keyed BLAKE2b-256", arm_blake2b, {0}},
        {"encrypt mode: encrypt to scratch", arm_aead_encrypt, {0}},
        {"encrypt mode: decrypt in place + verify", arm_aead_decrypt, {0}},
        {"libsodium one-shot AEAD (64 MiB)", arm_sodium_aead, {0}},
    };
    const int n_arms = (int)(sizeof arms / sizeof arms[0]);
    int reps = argc > 1 ? atoi(argv[1]) : 7;
    if (reps < 1 || reps > MAX_REPS)
        reps = 7;
    if (baton_auth_init() != 0)
        return 1;
    buf = malloc(TOTAL);
    dst = malloc(TOTAL);
    if (!buf || !dst)
        return 1;
    randombytes_buf(buf, TOTAL);
    memset(dst, 1, TOTAL);
    randombytes_buf(fkey.key, sizeof fkey.key);
    randombytes_buf(key32, sizeof key32);
    randombytes_buf(key64, sizeof key64);
    for (int a = 0; a < n_arms; a++)
        arms[a].fn(); /* warm-up: pages, caches, CPU dispatch */
    for (int r = 0; r < reps; r++) {
        for (int i = 0; i < n_arms; i++) {
            int a = (i + r) % n_arms; /* rotate the order each repetition */
            double t0 = now();
            arms[a].fn();
            double t = now() - t0;
            arms[a].mbps[r] = (double)TOTAL / t / 1e6;
        }
    }
    printf("%d MiB in %u KiB updates, %d repetitions, MB/s = 10^6 B/s\n", TOTAL >> 20,
           CHUNK >> 10, reps);
    printf("%-42s %9s %9s %9s\n", "arm", "median", "min", "max");
    for (int a = 0; a < n_arms; a++) {
        qsort(arms[a].mbps, (size_t)reps, sizeof(double), cmp_double);
        printf("%-42s %9.0f %9.0f %9.0f\n", arms[a].name, arms[a].mbps[reps / 2],
               arms[a].mbps[0], arms[a].mbps[reps - 1]);
    }
    free(buf);
    free(dst);
    return 0;
}
