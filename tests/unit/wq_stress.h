/* What the work queue stress tests (test_workqueue_stress.c,
 * test_workqueue_priority_stress.c) share: telling a slow (sanitizer or
 * valgrind) run, a reproducible per-thread random generator, and the
 * per-key bookkeeping that proves no key is processed by two workers at once
 * and no add is lost (every key added after the start of its last
 * processing is processed again). */
#ifndef KCR_TEST_WQ_STRESS_H
#define KCR_TEST_WQ_STRESS_H

#include <criterion/criterion.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "kcr/workqueue.h"

#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
#define SLOW_BUILD 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer) || __has_feature(address_sanitizer)
#define SLOW_BUILD 1
#endif
#endif
#ifndef SLOW_BUILD
#define SLOW_BUILD 0
#endif
#if __has_include(<valgrind/valgrind.h>)
#include <valgrind/valgrind.h>
#include "helpers/bounded.h"
#else
#define RUNNING_ON_VALGRIND 0
#endif

struct key_state {
    char name[24];
    atomic_int busy;         /* 1 while a worker holds it */
    atomic_long adds;        /* bumped before each add */
    atomic_long seen_at_get; /* `adds` read right after the last get */
    atomic_long processed;
};

/* A linear congruential generator: each thread seeds its own. */
static inline uint32_t next_rand(uint32_t *s)
{
    *s = *s * 1664525u + 1013904223u;
    return *s >> 8;
}

/* Names keys[i] "key-<i>" and zeroes its counts. */
static inline void keys_reset(struct key_state *keys, int n)
{
    for (int i = 0; i < n; i++) {
        snprintf(keys[i].name, sizeof keys[i].name, "key-%d", i);
        atomic_init(&keys[i].busy, 0);
        atomic_init(&keys[i].adds, 0);
        atomic_init(&keys[i].seen_at_get, -1);
        atomic_init(&keys[i].processed, 0);
    }
}

/* The state of the key called `name` ("key-<i>"). */
static inline struct key_state *key_find(struct key_state *keys, const char *name)
{
    int idx = 0;
    sscanf(name, "key-%d", &idx);
    return &keys[idx];
}

/* A worker's next key: workers with odd ids wait with a timeout, the others
 * without, to mix both waiting paths. False when the worker is to end: on
 * shutdown, or on an error (counted in *errors). */
static inline bool worker_get(kcr_workqueue *q, uintptr_t id, const char **name,
                              atomic_int *errors)
{
    for (;;) {
        kcr_err err = (id & 1) ? kcr_workqueue_get_timeout(q, 3, name) : test_wq_get(q, name);
        if (err == KCR_OK)
            return true;
        if (err == KCR_ERR_TIMEOUT)
            continue;
        if (err != KCR_ERR_SHUTDOWN)
            atomic_fetch_add(errors, 1);
        return false;
    }
}

/* A worker took k: an overlap (in *overlaps) if another worker holds it;
 * notes the adds this processing covers. */
static inline void key_take(struct key_state *k, atomic_int *overlaps)
{
    if (atomic_exchange(&k->busy, 1) != 0)
        atomic_fetch_add(overlaps, 1);
    atomic_store(&k->seen_at_get, atomic_load(&k->adds));
    atomic_fetch_add(&k->processed, 1);
}

/* The worker lets k go and marks `name` (its key, as got) done (a failure
 * counted in *errors). */
static inline void key_done(kcr_workqueue *q, struct key_state *k, const char *name,
                            atomic_int *errors)
{
    atomic_store(&k->busy, 0);
    if (kcr_workqueue_done(q, name) != KCR_OK)
        atomic_fetch_add(errors, 1);
}

/* Expects the last processing of every added key to have seen all its adds,
 * except keys whose index is a multiple of skip_every (0: none), whose adds
 * a remove may have dropped; sums the adds and processings. */
static inline void keys_expect_no_add_lost(struct key_state *keys, int n, int skip_every,
                                           long *total_adds, long *total_processed)
{
    *total_adds = *total_processed = 0;
    for (int i = 0; i < n; i++) {
        long adds = atomic_load(&keys[i].adds);
        *total_adds += adds;
        *total_processed += atomic_load(&keys[i].processed);
        if (adds > 0 && (skip_every == 0 || i % skip_every != 0))
            cr_expect_eq(atomic_load(&keys[i].seen_at_get), adds,
                         "%s: %ld adds but the last processing saw %ld", keys[i].name, adds,
                         atomic_load(&keys[i].seen_at_get));
    }
}

#endif
