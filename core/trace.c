/* The latency trace (core/trace.h): a preallocated record table, a key ->
 * open record map (open addressing, never shrinking: it holds at most as
 * many keys as there are records, at half load), one mutex, and the dump at
 * exit. */
#include "core/trace.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "core/hash.h"

#define KEY_MAX 96 /* longer keys are truncated (and may then share a record) */

typedef struct record {
    int64_t at[KCR__TR_N];
    char key[KEY_MAX];
    bool open;
} record;

static struct {
    pthread_once_t once;
    atomic_bool on;
    pthread_mutex_t mu;
    char *path;
    record *recs;
    uint32_t *slots; /* record index + 1; 0: empty */
    size_t cap, n, n_slots, dropped;
    int64_t wall_minus_mono;
} tr = {.once = PTHREAD_ONCE_INIT, .mu = PTHREAD_MUTEX_INITIALIZER};

static _Thread_local int64_t last_recv;

static void dump(void)
{
    FILE *f = fopen(tr.path, "w");
    if (!f)
        return; /* at exit nobody is left to tell; the missing file says it */
    pthread_mutex_lock(&tr.mu);
    fprintf(f, "# key recv decoded fifo pop handler enqueued got start (wall ns; dropped=%zu)\n",
            tr.dropped);
    for (size_t i = 0; i < tr.n; i++) {
        fputs(tr.recs[i].key, f);
        for (int s = 0; s < KCR__TR_N; s++)
            fprintf(f, " %lld",
                    (long long)(tr.recs[i].at[s] ? tr.recs[i].at[s] + tr.wall_minus_mono : 0));
        fputc('\n', f);
    }
    pthread_mutex_unlock(&tr.mu);
    fclose(f);
}

static void init(void)
{
    const char *path = getenv("KCR_TRACE");
    if (!path || !*path)
        return;
    const char *ev = getenv("KCR_TRACE_EVENTS");
    long cap = ev ? strtol(ev, NULL, 10) : 0;
    tr.cap = cap > 0 && cap <= (1L << 24) ? (size_t)cap : 16384;
    tr.n_slots = 1;
    while (tr.n_slots < 2 * tr.cap)
        tr.n_slots <<= 1;
    tr.path = strdup(path);
    tr.recs = calloc(tr.cap, sizeof *tr.recs);
    tr.slots = calloc(tr.n_slots, sizeof *tr.slots);
    if (!tr.path || !tr.recs || !tr.slots) {
        free(tr.path);
        free(tr.recs);
        free(tr.slots);
        return; /* tracing stays off: it is a diagnostic, never a failure */
    }
    tr.wall_minus_mono = kcr__wall_ns() - kcr__now_ns();
    atexit(dump);
    atomic_store(&tr.on, true);
}

bool kcr__trace_on(void)
{
    pthread_once(&tr.once, init);
    return atomic_load_explicit(&tr.on, memory_order_relaxed);
}

/* The slot of key: its record's, or the empty one where it would go. Under tr.mu. */
static uint32_t *slot_of(const char *key)
{
    size_t mask = tr.n_slots - 1;
    for (size_t i = kcr__hash_bytes(key, strlen(key)) & mask;; i = (i + 1) & mask) {
        uint32_t *s = &tr.slots[i];
        if (!*s || strcmp(tr.recs[*s - 1].key, key) == 0)
            return s;
    }
}

void kcr__trace_recv(int64_t mono_ns)
{
    if (kcr__trace_on())
        last_recv = mono_ns;
}

void kcr__trace_begin(const char *key)
{
    if (!kcr__trace_on())
        return;
    int64_t now = kcr__now_ns();
    char k[KEY_MAX];
    snprintf(k, sizeof k, "%s", key);
    pthread_mutex_lock(&tr.mu);
    uint32_t *s = slot_of(k);
    if (tr.n == tr.cap) {
        tr.dropped++;
        if (*s)
            tr.recs[*s - 1].open = false; /* later stages must not land on an old change */
    } else {
        record *r = &tr.recs[tr.n];
        memcpy(r->key, k, sizeof k);
        r->at[KCR__TR_RECV] = last_recv;
        r->at[KCR__TR_DECODED] = now;
        r->open = true;
        *s = (uint32_t)++tr.n;
    }
    pthread_mutex_unlock(&tr.mu);
}

/* The stage a hand-off's sender stamps before `stage`, its receiver's (none:
 * KCR__TR_N). The sender stamps after the hand-off returns, so the receiver
 * may stamp first: the hand-off is then taken as done at the receiver's
 * stamp and the sender's later stamp is ignored, so stages never go back. */
static kcr__trace_stage sender_of(kcr__trace_stage stage)
{
    switch (stage) {
    case KCR__TR_POP:
        return KCR__TR_FIFO;
    case KCR__TR_GOT:
        return KCR__TR_ENQUEUED;
    default:
        return KCR__TR_N;
    }
}

static void stamp(kcr__trace_stage stage, const char *key, bool close)
{
    int64_t now = kcr__now_ns();
    char k[KEY_MAX];
    snprintf(k, sizeof k, "%s", key);
    pthread_mutex_lock(&tr.mu);
    uint32_t *s = slot_of(k);
    if (*s) {
        record *r = &tr.recs[*s - 1];
        kcr__trace_stage sender = sender_of(stage);
        if (r->open && !r->at[stage]) {
            r->at[stage] = now;
            if (sender != KCR__TR_N && !r->at[sender])
                r->at[sender] = now;
        }
        if (close)
            r->open = false;
    }
    pthread_mutex_unlock(&tr.mu);
}

void kcr__trace_stamp(kcr__trace_stage stage, const char *key)
{
    if (kcr__trace_on())
        stamp(stage, key, false);
}

void kcr__trace_end(const char *key)
{
    if (kcr__trace_on())
        stamp(KCR__TR_START, key, true);
}
