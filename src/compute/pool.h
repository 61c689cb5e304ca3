/* Internal: the parallel-for of the persistent worker pool (compute.h has
 * the public create/destroy). Used by the CPU kernels only. */
#ifndef BATON_COMPUTE_POOL_H
#define BATON_COMPUTE_POOL_H

#include <stdint.h>

#include "compute/compute.h"

/* A task body: processes items [begin, end) of the range as chunk `chunk`
 * (0 <= chunk < the number of chunks of this run, which never exceeds
 * baton_pool_threads()). Chunk 0 always runs on the calling thread. */
typedef void (*baton_task_fn)(void *ctx, uint64_t begin, uint64_t end, uint32_t chunk);

/* Runs fn over [0, n) split into contiguous chunks, one per thread, at most
 * max_chunks chunks (and never more chunks than items), and returns when
 * every chunk has finished. Chunk c gets [c*n/C, (c+1)*n/C) in the sense of
 * an even split with the remainder going to the first chunks. pool may be
 * NULL (runs inline). Safe to call from several threads at once on one pool:
 * runs are serialized. fn must not call baton_pool_run on the same pool. */
void baton_pool_run(struct baton_pool *pool, uint64_t n, uint64_t max_chunks, baton_task_fn fn,
                    void *ctx);

/* As baton_pool_run, but balanced at run time: for kernels whose items
 * cost about the same but whose threads may not run at the same speed (in a
 * virtual machine the host slows one vCPU or another; a worker also starts
 * a little after the caller). Items [0, n) are each processed exactly once
 * by one of k = min(threads, max_chunks, n) threads. Thread c (the caller is
 * 0) first gets its even share (as baton_pool_run's chunk c) of the first
 * n - ceil(n / 4) items, then it claims pieces of the rest from a shared
 * counter, each piece ceil(left / (2k)) items, until none is left (guided
 * self-scheduling, Polychronopoulos and Kuck 1987, takes ceil(left / k);
 * half of that, as in factoring, Hummel, Schonberg and Flynn 1992, leaves
 * smaller last pieces for a slow thread). So fn is called
 * one or more times per thread, with `chunk` = that thread's index c (per-
 * thread scratch still works: calls with the same c never overlap in time),
 * and which thread gets which item varies from run to run: use it only for
 * tasks whose result per item does not depend on the thread. pool may be
 * NULL (inline, one call). Same sharing rules as baton_pool_run. */
void baton_pool_run_dynamic(struct baton_pool *pool, uint64_t n, uint64_t max_chunks,
                            baton_task_fn fn, void *ctx);

#endif
